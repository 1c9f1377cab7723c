from pagination import Page, paginate


def pages(results: list[str], per_page: int, up_to: int) -> list[Page]:
    return [paginate(results, number, per_page) for number in range(1, up_to + 1)]


def test_browsing_a_category() -> None:
    lamps = [f"lamp {n}" for n in range(1, 8)]  # 7 results, 3 per page
    shoes = [f"shoe {n}" for n in range(1, 7)]  # 6 results, 3 per page: no partial page
    assert pages(lamps, 3, up_to=3) == [
        Page(1, lamps[0:3], 3, has_previous=False, has_next=True),
        Page(2, lamps[3:6], 3, has_previous=True, has_next=True),
        Page(3, lamps[6:7], 3, has_previous=True, has_next=False),
    ]
    assert pages(shoes, 3, up_to=3) == [
        Page(1, shoes[0:3], 2, has_previous=False, has_next=True),
        Page(2, shoes[3:6], 2, has_previous=True, has_next=False),
        Page(3, [], 2, has_previous=True, has_next=False),
    ]


def test_search_results_ten_per_page() -> None:
    tents = [f"tent {n}" for n in range(1, 21)]  # 20 results: two full pages
    stoves = [f"stove {n}" for n in range(1, 12)]  # 11 results: one on the second page
    assert [(page.results, page.total_pages, page.has_next) for page in pages(tents, 10, up_to=3)] == [
        (tents[0:10], 2, True),
        (tents[10:20], 2, False),
        ([], 2, False),
    ]
    assert [(page.results, page.has_previous, page.has_next) for page in pages(stoves, 10, up_to=3)] == [
        (stoves[0:10], False, True),
        (stoves[10:11], True, False),
        ([], True, False),
    ]


def test_order_history_two_per_page() -> None:
    orders = ["#1001", "#1002", "#1003", "#1004"]
    assert pages(orders, 2, up_to=3) == [
        Page(1, ["#1001", "#1002"], 2, has_previous=False, has_next=True),
        Page(2, ["#1003", "#1004"], 2, has_previous=True, has_next=False),
        Page(3, [], 2, has_previous=True, has_next=False),
    ]
    assert paginate(orders + ["#1005"], 3, 2) == Page(3, ["#1005"], 3, True, False)
