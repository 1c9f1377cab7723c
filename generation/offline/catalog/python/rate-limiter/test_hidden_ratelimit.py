from ratelimit import SlidingWindowLimiter


def test_a_burst_then_the_window_slides() -> None:
    limiter = SlidingWindowLimiter(limit=3, window=60.0)
    assert [limiter.allow("api-key-7", t) for t in (0.0, 1.0, 2.0, 3.0)] == [
        True,
        True,
        True,
        False,
    ]
    assert limiter.allow("api-key-7", 60.0) is True  # the request at 0.0 no longer counts
    assert limiter.allow("api-key-7", 60.5) is False
    assert limiter.allow("api-key-7", 61.0) is True


def test_clients_do_not_share_a_window() -> None:
    limiter = SlidingWindowLimiter(limit=1, window=10.0)
    assert limiter.allow("alice", 5.0) is True
    assert limiter.allow("bob", 5.0) is True
    assert limiter.allow("alice", 9.0) is False
    assert limiter.allow("alice", 15.5) is True
