"""The mitmproxy side: the addon and everything that runs per flow.

Owns the addon class (`addon`), turning a flow into an event (`capture`, `post_data`, `sizes`),
sessions from proxy credentials (`credentials`), the sites' auto-login header (`header_login`),
mitmweb's flow comments (`flow_notes`) and the control API answered on a proxied flow
(`reserved_host`).

May import: mitmproxy, `webarena_live.addon.control`, `webarena_live.addon.runs` and the
evaluator's exported names. Never the commands or the demo.
"""
