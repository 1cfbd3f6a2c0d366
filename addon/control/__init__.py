"""The control API: the ASGI app, its pydantic models, middleware, event streams and dashboard.

Owns the routes (`app`, one router per resource: `session_routes` and the others), what they work on
(`context`, `dependencies`), request bodies (`bodies`), the refusals and their handler (`errors`), the
cross-cutting rules (`middleware`, `guard`), the sites' reset calls
(`reset`), the Server-Sent Event streams (`streams`), the control port's server (`server`) and the
dashboard's files.

May import: `webarena_live.runs`, the evaluator's exported names, FastAPI/Starlette/uvicorn.
Never mitmproxy: the proxy hands requests for the reserved host to this app (`proxy.reserved_host`).
"""
