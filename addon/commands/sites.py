"""`webarena-live sites up|status|down --config MAP`: the site map's container copies without `serve`
(`webarena_live.sites`). `up` leaves them running and remembered, so a `serve` with the same map adopts
them instead of making them again."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from webarena_live.evaluator import WebArenaLiveError
from webarena_live.sites import CopyKeeper, load_site_map


def run(args: argparse.Namespace) -> int:
    try:
        _, plan = load_site_map(args.config)
    except WebArenaLiveError as error:
        print(error, file=sys.stderr)
        return 2
    if plan is None:
        print(f"{args.config}: no site names an image: nothing to make (see docs/guides/official-dataset.md)",
              file=sys.stderr)  # fmt: skip
        return 2
    keeper = CopyKeeper(plan, keep=True)  # this command's copies outlive it
    try:
        return asyncio.run(_act(keeper, args.action, args.json))
    except WebArenaLiveError as error:
        print(error, file=sys.stderr)
        return 1
    finally:
        for engine in keeper.engines.values():
            engine.close()


async def _act(keeper: CopyKeeper, action: str, as_json: bool) -> int:
    if action == "down":
        removed = await keeper.down()
        _show({"removed": removed}, as_json, [f"removed {name}" for name in removed] or ["nothing to remove"])
        return 0
    if action == "up":
        copies = len(keeper.plan.copies)
        print(f"making or adopting {copies} cop{'ies' if copies > 1 else 'y'} (each waited for until ready)",
              file=sys.stderr, flush=True)  # fmt: skip
        outcomes = await keeper.up()
        failed = [outcome for outcome in outcomes if not outcome.ok]
        lines = [
            f"{'ready' if o.ok else 'FAILED'}  {o.site} {o.url}  {o.detail} ({o.seconds:.1f} s)"
            for o in outcomes
        ]
        _show({"copies": [o.view() for o in outcomes]}, as_json, lines)
        return 1 if failed else 0
    rows = await keeper.status()
    lines = [
        f"{r['site']} {r['index']}  {r['name']}  {r['state']}{' (fresh)' if r['fresh'] else ''}  {r['url']}  "
        f"on {r['engine']}" + (f"  {r['detail']}" if r["detail"] else "")
        for r in rows
    ]
    _show({"copies": rows}, as_json, lines)
    return 0 if all(r["state"] == "running" for r in rows) else 1


def _show(document: dict[str, Any], as_json: bool, lines: list[str]) -> None:
    print(json.dumps(document, indent=2) if as_json else "\n".join(lines), flush=True)
