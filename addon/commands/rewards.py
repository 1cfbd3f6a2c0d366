"""`webarena-live verify` and `webarena-live export harbor`: Harbor's verifier and task folders.

The work is the rewards package's (`rewards/harbor.py`); here the parsed arguments are handed to it
and its outcome printed: one line, and the exit status (0 written; 1 no reward for the session; 2 a
usage mistake, nothing written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webarena_live.evaluator import WebArenaLiveError


def run_verify(args: argparse.Namespace) -> int:
    from webarena_live.rewards.harbor import default_out, verify

    answer = Path(args.answer) if args.answer else None
    out = Path(args.out) if args.out else default_out()
    keep = getattr(args, "keep_site_errors", False)
    status, line = verify(
        args.session, answer, control=args.control, token=None, out=out, mask_site_errors=not keep
    )
    print(line, file=sys.stderr if status else sys.stdout)
    return status


def run_export(args: argparse.Namespace) -> int:
    from webarena_live.rewards.harbor import export

    try:
        written = export(
            args.tasks,
            Path(args.out),
            task_ids=args.task_ids,
            image=args.image,
            control=args.control,
            requirement=args.requirement,
        )
    except (WebArenaLiveError, OSError) as error:
        print(f"webarena-live export harbor: {error}", file=sys.stderr)
        return 2
    print(f"{len(written)} Harbor task folder(s) written to {args.out}")
    return 0
