"""The fleet: many proxy processes behind one control port, local or on a Ray cluster's nodes, in two
rooms (docs/architecture.md, Workers and Ray).

- `fleet/front/`: the one control port in front of every worker: the control API that forwards each
  request to the worker that owns its session and answers the routes about every session once, the
  sessions' life and their leases, what happens when a worker dies or leaves, the shared proxy ports'
  router and the door for workers on other machines.
- `fleet/workers/`: the worker processes, started, watched and started again (`local`), or Ray actors
  placed and watched (`ray_workers`), each one on its node (`ray_actor`).
- `service`: `serve --workers N [--ray]` once its command line is read: builds both rooms and runs them.

Owns: the fleet — its front, its workers and the service that runs them.

May import: `webarena_live.addresses` (placement, credentials), `control` (errors, limits, the wire, the
stream format), `runs`, `replicas`, `webarena_live.launch`, the evaluator's exported names, httpx,
FastAPI/Starlette and Ray (`workers.ray_workers` and `workers.ray_actor` only, imported by `--ray`
alone). Never mitmproxy: the front runs in a process without it; never the proxy.
"""
