"""The fleet: many proxy processes behind one control port, local or on a Ray cluster's nodes.

Owns `serve --workers N [--ray]` once its command line is read (`service`: the front, its ports, its
workers, the banner); the worker processes, started, watched and started again (`workers`); the Ray
workers, placed and watched (`ray_pool`) and each one on its node (`ray_actor`); the front, which
forwards each request to the worker that owns its session (`front`), and its control API, which
answers the routes about every session once (`front_app`); and the shared proxy ports, carried to
the right worker (`router`). See docs/architecture.md, Workers and Ray.

May import: `webarena_live.addresses` (placement, credentials), `control` (errors, limits, the stream
format), `runs`, `webarena_live.launch`, the evaluator's exported names, httpx, FastAPI/Starlette and
Ray (`ray_pool` and `ray_actor` only, imported by `--ray` alone). Never mitmproxy: the front runs in a
process without it; never the proxy.
"""
