"""Many proxies behind one control port: where sessions go, and the workers that hold them.

`placement.py` decides which worker and which proxy port a session gets (pure: no
mitmproxy, no web framework), so every engine that runs workers reuses it; `workers.py`
starts, watches and restarts local worker processes; `front.py` is the control API that
forwards each request to the worker that owns its session; `router.py` carries the shared
proxy ports to the right worker. See docs/architecture.md, Workers.
"""
