"""The mitmproxy side: the addon and everything that runs per flow.

Owns the addon class (`addon`), turning a flow into an event (`capture`, `post_data`, `sizes`),
sessions from proxy credentials (`credentials`) and from their own addresses (`session_addresses`),
the sites' auto-login header (`header_login`), mitmweb's flow comments (`flow_notes`), the control API
answered on a proxied flow (`reserved_host`), the options (`options`) and the CA the Ray workers share
(`certificates`).

May import: mitmproxy, `webarena_live.control`, `webarena_live.runs`, `webarena_live.addresses` and
the evaluator's exported names. Never the fleet, the client, the commands or the demo.
"""
