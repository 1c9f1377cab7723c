import pytest

from pagination import paginate

ORDERS = [f"order-{number}" for number in range(1, 24)]  # 23 orders


def test_the_middle_and_the_last_page_of_orders() -> None:
    middle = paginate(ORDERS, 2, per_page=10)
    assert (middle.results[0], middle.results[-1], len(middle.results)) == (
        "order-11",
        "order-20",
        10,
    )
    assert (middle.total_pages, middle.has_previous, middle.has_next) == (3, True, True)
    last = paginate(ORDERS, 3, per_page=10)
    assert last.results == ["order-21", "order-22", "order-23"]
    assert (last.has_previous, last.has_next) == (True, False)


def test_one_result_per_page_and_bad_arguments() -> None:
    page = paginate(["only"], 1, per_page=1)
    assert (page.results, page.total_pages, page.has_previous, page.has_next) == (
        ["only"],
        1,
        False,
        False,
    )
    with pytest.raises(ValueError, match="per_page"):
        paginate(ORDERS, 1, per_page=0)
