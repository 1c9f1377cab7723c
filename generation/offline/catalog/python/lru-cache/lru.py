"""A least-recently-used cache with a fixed capacity."""

from collections import OrderedDict


class LRUCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        # Least recently used first.
        self._entries: OrderedDict[str, object] = OrderedDict()

    def get(self, key: str, default: object = None) -> object:
        if key not in self._entries:
            return default
        self._entries.move_to_end(key)
        return self._entries[key]

    def put(self, key: str, value: object) -> None:
        if key in self._entries:
            self._entries.move_to_end(key)
        self._entries[key] = value
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def keys(self) -> list[str]:
        """Cached keys, least recently used first."""
        return list(self._entries)
