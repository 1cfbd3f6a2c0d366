"""Many runs of the reference evaluator in one interpreter, run with the ORACLE's interpreter (never
imported by pytest): tests/support/oracle_bridge.py's `run_in_oracle` sends it one command line at a
time, as `python ARGS` would take it (`-m MODULE ...`, `-c CODE ...` or `SCRIPT ...`).

Starting the interpreter and importing the reference is most of the CPU of a short judgement, and the
suites ask for hundreds; the reference's own code still does all the judging. Each request is a JSON
line `{"args": [...], "input": str | null, "cwd": str | null}`; each answer a JSON line
`{"returncode": int, "stdout": str, "stderr": str}` on the file descriptor the bridge passes (the
reference's own writes to the process's stdout and stderr are the request's, whatever object they hold).
"""

from __future__ import annotations

import io
import json
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
    out, err = Switch(), Switch()
    sys.stdout, sys.stderr = out, err
    home = os.getcwd()
    for line in requests:
        request: dict[str, Any] = json.loads(line)
        out.target, err.target = io.StringIO(), io.StringIO()
        sys.stdin = io.StringIO(request.get("input") or "")
        os.chdir(request.get("cwd") or home)
        code = run(request["args"])
        answer = {"returncode": code, "stdout": out.target.getvalue(), "stderr": err.target.getvalue()}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
