from lru import LRUCache


def test_rendered_pages_evict_the_least_recently_read() -> None:
    cache = LRUCache(capacity=3)
    cache.put("/", "<home>")
    cache.put("/about", "<about>")
    cache.put("/pricing", "<pricing v1>")
    assert cache.get("/") == "<home>"  # the home page is now the most recently used
    cache.put("/pricing", "<pricing v2>")  # rewriting counts as use too
    cache.put("/blog", "<blog>")  # over capacity: /about goes
    assert cache.get("/about", "miss") == "miss"
    assert cache.keys() == ["/", "/pricing", "/blog"]
    assert cache.get("/pricing") == "<pricing v2>"


def test_a_small_cache_of_user_avatars() -> None:
    cache = LRUCache(capacity=2)
    cache.put("ada", "ada.png")
    cache.put("grace", "grace.png")
    cache.put("ada", "ada-2024.png")
    cache.put("linus", "linus.png")  # grace was used least recently
    assert [cache.get(name, "none") for name in ("grace", "ada", "linus")] == [
        "none",
        "ada-2024.png",
        "linus.png",
    ]
    assert cache.keys() == ["ada", "linus"]


def test_reads_keep_hot_entries_alive() -> None:
    cache = LRUCache(capacity=2)
    cache.put("EUR", 1.0)
    cache.put("USD", 1.08)
    for _ in range(3):
        assert cache.get("EUR") == 1.0
        cache.put("USD", 1.09)
    cache.put("GBP", 0.85)  # EUR was read before the last USD update, so it goes
    assert cache.keys() == ["USD", "GBP"]
    assert cache.get("EUR", 0) == 0
