"""`BoundedMemo`: the one cache shape the per-event code paths use.

Capture and serialization run once per proxied flow, and most of what they
derive repeats from flow to flow (header pairs, content types, query
strings, origins). A dict subclass whose `__missing__` computes the value
costs exactly one C-level dictionary lookup on a hit — nothing cheaper is
possible in Python — and bounding it by clearing it keeps a client that
invents endless distinct values from growing the proxy's memory: the values
of current traffic come back at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

DEFAULT_LIMIT = 8192


class BoundedMemo(dict[K, V], Generic[K, V]):
    """`memo[key]` is `compute(key)`, remembered; at most `limit` entries are kept."""

    __slots__ = ("compute", "limit")

    def __init__(self, compute: Callable[[K], V], *, limit: int = DEFAULT_LIMIT) -> None:
        super().__init__()
        self.compute = compute
        self.limit = limit

    def __missing__(self, key: K) -> V:
        value = self.compute(key)
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value
