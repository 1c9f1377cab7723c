from ratelimit import SlidingWindowLimiter


def decisions(limiter: SlidingWindowLimiter, requests: list[tuple[str, float]]) -> list[bool]:
    return [limiter.allow(client, at) for client, at in requests]


def test_a_burst_then_the_window_slides() -> None:
    limiter = SlidingWindowLimiter(limit=3, window=60)
    requests = [("app", 0), ("app", 10), ("app", 20), ("app", 30), ("app", 59), ("app", 60)]
    # The fourth and fifth requests are over the limit; at 60 the request at 0 has expired.
    assert decisions(limiter, requests) == [True, True, True, False, False, True]


def test_login_attempts_are_limited_per_account() -> None:
    limiter = SlidingWindowLimiter(limit=2, window=1.0)
    requests = [
        ("alice", 0.0),
        ("bob", 0.1),
        ("alice", 0.5),
        ("alice", 0.9),  # alice's third attempt within a second
        ("bob", 0.9),
        ("alice", 1.0),  # her first attempt is exactly one second old
        ("bob", 1.0),  # bob's attempts at 0.1 and 0.9 still count
    ]
    assert decisions(limiter, requests) == [True, True, True, False, True, True, False]


def test_denied_retries_do_not_extend_the_wait() -> None:
    limiter = SlidingWindowLimiter(limit=1, window=10)
    requests = [("crawler", 0), ("crawler", 5), ("crawler", 9), ("crawler", 10), ("crawler", 15)]
    assert decisions(limiter, requests) == [True, False, False, True, False]
