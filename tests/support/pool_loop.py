"""A replica pool's tests on a loop of their own, calling the pool as `serve` calls it: on the loop (the
pool spawns its resets there). Shared by the pool's model test and the held copies' tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class OnLoop:
    """A test's own event loop (`self.loop`, set by the class using this) and the two ways onto it."""

    loop: asyncio.AbstractEventLoop

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def within(self, call: Callable[[], T]) -> T:
        """A plain call on the loop, as `serve` makes it (the pool spawns its resets there)."""

        async def on_loop() -> T:
            return call()

        return self.run(on_loop())
