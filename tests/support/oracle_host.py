"""Many runs of the reference evaluator in one interpreter, run with the ORACLE's interpreter (never
imported by pytest): tests/support/oracle_bridge.py's `run_in_oracle` sends it one command line at a
time, as `python ARGS` would take it (`-m MODULE ...`, `-c CODE ...` or `SCRIPT ...`).

Starting the interpreter and importing the reference is most of the CPU of a short judgement, and the
suites ask for hundreds; the reference's own code still does all the judging. Each request is a JSON
line `{"args": [...], "input": str | null, "cwd": str, "env": {...}}` (the caller's folder and
environment, as a subprocess would inherit them); each answer a JSON line
`{"returncode": int, "stdout": str, "stderr": str}` on the file descriptor the bridge passes. What the
run writes through `sys.stdout` and `sys.stderr` is its answer's, also from a handler that kept either
object from an earlier run; writes to the process's file descriptors 1 and 2 go to the host's log.
"""

from __future__ import annotations

import io
import json
import logging
import os
import runpy
import sys
import traceback
from typing import Any, TextIO


class Switch(io.TextIOBase):
    """A text stream that writes to the current request's buffer: a handler that kept `sys.stdout` at
    import still writes to the request that logs."""

    def __init__(self) -> None:
        self.target: TextIO = io.StringIO()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return self.target.write(text)

    def flush(self) -> None:
        pass


def run(args: list[str]) -> int:
    """`python ARGS` in this interpreter; its exit status."""
    saved_path = list(sys.path)
    try:
        if args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        elif args[0] == "-c":
            sys.argv = ["-c", *args[2:]]
            sys.path.insert(0, "")
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = list(args)
            sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as leaving:
        code = leaving.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except BaseException:  # told as `python` would: a traceback and status 1
        traceback.print_exc()
        return 1
    finally:
        sys.path[:] = saved_path
    return 0


def main() -> None:
    answers = os.fdopen(int(sys.argv[1]), "w", encoding="utf-8")
    requests = sys.stdin
    del sys.path[0]  # this script's folder: `python -m` or `-c` would not have it
    out, err = Switch(), Switch()
    for line in requests:
        request: dict[str, Any] = json.loads(line)
        out.target, err.target = io.StringIO(), io.StringIO()
        # What one run may have changed is set back as a new interpreter would have it.
        sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO(request.get("input") or "")
        logging.disable(logging.NOTSET)
        os.environ.clear()
        os.environ.update(request["env"])
        try:
            os.chdir(request["cwd"])
            code = run(request["args"])
        except OSError as error:  # the caller's folder is gone
            print(f"oracle host: {error}", file=sys.stderr)
            code = 1
        answer = {"returncode": code, "stdout": out.target.getvalue(), "stderr": err.target.getvalue()}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
