"""The keeper of the container copies (docs/architecture.md, Copies as containers): it makes each copy
of the plan on its engine, adopts one a restarted `serve` finds running under its name, makes a changed
or dead one new (a reset: the container removed, a new one run from the image with the same name, ports
and settings, its own volumes new), watches the engines for copies that stop, and removes its copies
when the pool closes unless told to keep them.

It owns no lease: the pool (`webarena_live.replicas`) decides when a copy is made new and calls it
through the copy's `ResetWay` (`CopyReset`), as it calls a reset endpoint; the keeper only does it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webarena_live.evaluator import WebArenaLiveError, placeholder
from webarena_live.replicas.memory import state_dir
from webarena_live.replicas.ways import ResetOutcome
from webarena_live.sites.engine import ContainerState, DockerEngine, Engine
from webarena_live.sites.plan import LABEL, CopyPlan, SitesPlan
from webarena_live.sites.ready import wait_ready
from webarena_live.sites.records import RECORDS_FILE, CopyRecords

logger = logging.getLogger("webarena_live.sites")

WATCH_SECONDS = 2.0
"""How often the engines are asked which copies still run."""

Key = tuple[str, int]


@dataclass(frozen=True)
class CopyReset:
    """The pool's way to make one copy new (`replicas.reset.ResetWay`): a new container from the image."""

    keeper: CopyKeeper
    copy: CopyPlan
    kind: str = "recreate"

    async def reset(self, timeout: float) -> ResetOutcome:
        return await self.keeper.recreate(self.copy, "reset")

    async def bring_up(self) -> ResetOutcome | None:
        return await self.keeper.bring_up(self.copy)

    def changed(self) -> None:
        self.keeper.records.changed(self.copy)


class CopyKeeper:
    """Every container copy of a `SitesPlan`, on its engines."""

    def __init__(
        self,
        plan: SitesPlan,
        *,
        engines: Mapping[str, Engine] | None = None,
        records: Path | None = None,
        keep: bool | None = None,
    ) -> None:
        self.plan = plan
        urls = sorted({copy.engine for copy in plan.copies})
        self.engines: dict[str, Engine] = dict(engines or {url: DockerEngine(url) for url in urls})
        self.records = CopyRecords(records if records is not None else state_dir() / RECORDS_FILE)
        self.keep = plan.keep if keep is None else keep
        """Leave the copies running at `close` (the next keeper adopts them)."""
        self.ways = {(copy.site, copy.index): CopyReset(self, copy) for copy in plan.copies}
        self.ceilings = plan.ceilings
        self._up: dict[Key, str] = {}
        """The copies ready now, by (site, index): their container's id (what `watch` checks)."""
        self._making: set[Key] = set()

    # --- one copy -------------------------------------------------------------------------------------

    async def bring_up(self, copy: CopyPlan) -> ResetOutcome:
        """Make `copy` ready at start: adopt the container running under its name when this keeper made
        it from the same plan and nothing changed it since, else make it anew."""
        started = time.perf_counter()
        try:
            found = await self._inspect(copy)
        except WebArenaLiveError as error:
            return self._outcome(copy, started, False, str(error))
        why = self._not_adoptable(copy, found)
        if why is not None:
            return await self.recreate(copy, why, started=started)
        assert found is not None
        self._making.add((copy.site, copy.index))
        try:
            problem = await wait_ready(copy, lambda: self._dead(copy))
        finally:
            self._making.discard((copy.site, copy.index))
        if problem is not None:
            return await self.recreate(copy, f"adopted {found.id[:12]}, which {problem}", started=started)
        self._up[(copy.site, copy.index)] = found.id
        logger.info("%s: adopted its running container %s", copy.label(), found.id[:12])
        return self._outcome(copy, started, True, f"adopted running container {found.id[:12]}")

    def _not_adoptable(self, copy: CopyPlan, found: ContainerState | None) -> str | None:
        if found is None:
            return "made: no container yet"
        if not found.running:
            return f"made again: {found.why_not_running()}"
        if found.labels.get(f"{LABEL}.spec") != copy.spec_hash:
            return f"made again: {found.name} ({found.id[:12]}) was made from another plan"
        if not self.records.fresh(copy, found.id):
            return f"made again: {found.id[:12]} changed since it was made, or is not one this keeper made"
        return None

    async def recreate(self, copy: CopyPlan, why: str, *, started: float | None = None) -> ResetOutcome:
        """Make `copy` new: its container (and own volumes) removed, a new one run from the image with the
        same name, ports and settings, waited for until ready. Never for a copy whose changed shared
        volume would keep the change."""
        started = time.perf_counter() if started is None else started
        key = (copy.site, copy.index)
        if copy.keeps_changes and why == "reset":
            shared = ", ".join(source for source, _, mode in copy.volumes if mode == "shared")
            return self._outcome(
                copy, started, False,
                f"cannot be made new: it changed, and its shared volumes ({shared}) would keep the change; "
                "restore them (the reference's setup), then restart serve",
            )  # fmt: skip
        self._making.add(key)
        self._up.pop(key, None)
        try:
            old = await self._inspect(copy)
            await self._remove(copy)
            self.records.forget(copy)
            made = await asyncio.to_thread(self.engines[copy.engine].run, copy)
            self.records.made(copy, made.id)
            problem = await wait_ready(copy, lambda: self._dead(copy))
        except WebArenaLiveError as error:
            return self._outcome(copy, started, False, str(error))
        finally:
            self._making.discard(key)
        if problem is not None:
            return self._outcome(copy, started, False, f"new container {made.id[:12]} {problem}")
        self._up[key] = made.id
        was = f" (was {old.id[:12]})" if old is not None else ""
        detail = f"new container {made.id[:12]}{was}" + ("" if why == "reset" else f"; {why}")
        logger.info("%s: %s, ready in %.1f s", copy.label(), detail, time.perf_counter() - started)
        return self._outcome(copy, started, True, detail)

    async def _inspect(self, copy: CopyPlan) -> ContainerState | None:
        return await asyncio.to_thread(self.engines[copy.engine].inspect, copy.name)

    async def _remove(self, copy: CopyPlan) -> bool:
        removed: bool = await asyncio.to_thread(self.engines[copy.engine].remove, copy.name, copy.own_volumes)
        return removed

    async def _dead(self, copy: CopyPlan) -> str | None:
        try:
            found = await self._inspect(copy)
        except WebArenaLiveError as error:
            return str(error)
        if found is None:
            return f"its container {copy.name} is gone"
        return None if found.running else found.why_not_running()

    @staticmethod
    def _outcome(copy: CopyPlan, started: float, ok: bool, detail: str) -> ResetOutcome:
        seconds = round(time.perf_counter() - started, 3)
        return ResetOutcome(site=placeholder(copy.site), url=copy.url, ok=ok, seconds=seconds, detail=detail)

    # --- every copy -----------------------------------------------------------------------------------

    async def up(self) -> list[ResetOutcome]:
        """Every copy made or adopted, at once (`webarena-live sites up`); the containers of this plan's
        name that it has no copy for are removed first."""
        await self.remove_extras()
        return list(await asyncio.gather(*(self.bring_up(copy) for copy in self.plan.copies)))

    async def remove_extras(self) -> list[str]:
        """Remove the containers labelled with this plan's names that are no copy of it (a site map that
        now asks for fewer copies): the names removed."""
        planned = {(copy.engine, copy.name) for copy in self.plan.copies}
        removed = []
        for url, engine in self.engines.items():
            for prefix in sorted({copy.prefix for copy in self.plan.copies if copy.engine == url}):
                found = await asyncio.to_thread(engine.listed, prefix)
                for container in found:
                    if (url, container.name) in planned:
                        continue
                    await asyncio.to_thread(engine.remove, container.name, list(container.own_volumes))
                    logger.info("removed %s on %s: no copy of the site map has its name", container.name, url)
                    removed.append(container.name)
        return removed

    async def down(self) -> list[str]:
        """Remove every copy of the plan and its own volumes (and the extras): the names removed."""
        removed = await self.remove_extras()
        for copy in self.plan.copies:
            if await self._remove(copy):
                removed.append(copy.name)
            self.records.forget(copy)
            self._up.pop((copy.site, copy.index), None)
        return removed

    async def status(self) -> list[dict[str, Any]]:
        """Each copy as its engine sees it: name, engine, URL, container id and state."""
        rows = []
        for copy in self.plan.copies:
            try:
                found = await self._inspect(copy)
                state = "missing" if found is None else found.status
                detail = None if found is None or found.running else found.why_not_running()
            except WebArenaLiveError as error:
                found, state, detail = None, "unreachable", str(error)
            rows.append({
                "site": placeholder(copy.site), "index": copy.index, "name": copy.name,
                "engine": copy.engine, "url": copy.url, "container": found.id[:12] if found else None,
                "state": state, "detail": detail,
                "fresh": bool(found is not None and self.records.fresh(copy, found.id)),
            })  # fmt: skip
        return rows

    async def watch(self, lost: Callable[[str, int, str], None], interval: float = WATCH_SECONDS) -> None:
        """Tell `lost(site, index, why)` of each ready copy whose container stopped, died, vanished or was
        replaced, from the engines' own state (not from failed answers), until cancelled."""
        with contextlib.suppress(WebArenaLiveError):
            await self.remove_extras()
        by_engine: dict[str, list[CopyPlan]] = {}
        for copy in self.plan.copies:
            by_engine.setdefault(copy.engine, []).append(copy)
        while True:
            await asyncio.sleep(interval)
            for url, copies in by_engine.items():
                try:
                    listed = await asyncio.to_thread(self.engines[url].listed, copies[0].prefix)
                except WebArenaLiveError as error:
                    logger.warning("cannot ask %s which copies run: %s", url, error)
                    continue
                found = {container.name: container for container in listed}
                for copy in copies:
                    key = (copy.site, copy.index)
                    expected = self._up.get(key)
                    if expected is None or key in self._making:
                        continue
                    container = found.get(copy.name)
                    why = (
                        f"its container {copy.name} vanished" if container is None
                        else f"its container {copy.name} was replaced by another" if container.id != expected
                        else None if container.running else container.why_not_running()
                    )  # fmt: skip
                    if why is not None:
                        self._up.pop(key, None)
                        logger.warning("%s: %s", copy.label(), why)
                        lost(copy.site, copy.index, why)

    def problems(self) -> list[str]:
        """What stops the copies before anything starts: each engine that does not answer, one line each."""
        found = [engine.check() for engine in self.engines.values()]
        return [problem for problem in found if problem is not None]

    def describe(self) -> str:
        copies = self.plan.copies
        spares = sum(found.spec.spares for found in self.plan.sites.values())
        engines = len(self.engines)
        return (
            f"{len(copies)} container copies on {engines} engine{'s' if engines > 1 else ''}"
            + (f", {spares} spare{'s' if spares > 1 else ''}" if spares else "")
            + ("; kept at exit" if self.keep else "; removed at exit")
        )

    async def close(self) -> None:
        """Remove the copies unless told to keep them, then let go of the engines."""
        try:
            if not self.keep:
                removed = await self.down()
                logger.info("removed %d container copies", len(removed))
        except WebArenaLiveError as error:
            logger.warning("could not remove every copy: %s", error)
        finally:
            for engine in self.engines.values():
                engine.close()
