"""The control API: the ASGI app, its pydantic models, middleware, event streams and dashboard.

Owns the routes (`app`, `agent_routes`), what they work on (`context`), request bodies (`bodies`),
JSON errors (`errors`), the cross-cutting rules (`middleware`, `guard`), the sites' reset calls
(`reset`), the Server-Sent Event streams (`streams`), the control port's server (`server`) and the
dashboard's files.

May import: `webarena_live.runs`, the evaluator's exported names, FastAPI/Starlette/uvicorn.
Never mitmproxy: the proxy hands requests for the reserved host to this app (`proxy.reserved_host`).
"""
