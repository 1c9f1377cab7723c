from lru import LRUCache


def test_session_tokens_under_a_capacity_of_three() -> None:
    cache = LRUCache(capacity=3)
    for user in ("u1", "u2", "u3"):
        cache.put(user, f"token-{user}")
    assert cache.get("u1") == "token-u1"
    cache.put("u4", "token-u4")  # u2 was used least recently
    assert cache.get("u2", "expired") == "expired"
    cache.put("u3", "token-u3b")
    cache.put("u5", "token-u5")  # now u1 is the least recently used
    assert cache.keys() == ["u4", "u3", "u5"]


def test_a_cache_of_one() -> None:
    cache = LRUCache(capacity=1)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") is None
    assert cache.get("b") == 2
    assert cache.keys() == ["b"]
