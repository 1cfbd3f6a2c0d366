"""The fleet: many proxy processes behind one control port, and where each session goes.

Owns placement, which worker and which proxy port a session gets (`placement`, pure: every engine
that runs workers reuses it); the worker processes of `serve --workers`, started, watched and
started again (`workers`); the front, which forwards each request to the worker that owns its
session (`front`), and its control API, which answers the routes about every session once
(`front_app`); and the shared proxy ports, carried to the right worker (`router`). See
docs/architecture.md, Workers.

May import: `control` (errors, limits, the stream format), `runs`, `webarena_live.launch`, the
evaluator's exported names, httpx and FastAPI/Starlette. Never mitmproxy: the front runs in a
process without it.
"""
