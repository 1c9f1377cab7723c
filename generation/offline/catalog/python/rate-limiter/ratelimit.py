"""A sliding-window rate limiter: at most `limit` requests per client in any `window` seconds."""


class SlidingWindowLimiter:
    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        # Client -> times of its allowed requests that may still count, oldest first.
        self._allowed: dict[str, list[float]] = {}

    def allow(self, client: str, now: float) -> bool:
        """Decide on a request by `client` at time `now` (seconds) and remember it if allowed."""
        recent = [at for at in self._allowed.get(client, []) if at > now - self.window]
        self._allowed[client] = recent
        if len(recent) < self.limit:
            recent.append(now)
            return True
        return False
