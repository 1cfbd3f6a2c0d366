"""A mitmproxy script for the proxy under test (`--set scripts=...`): host names ending in `.test`
are this machine, as a hosts-file entry would make them.

Chromium sends `localhost` and `127.0.0.1` sites around any proxy auto-config script, so a test of
the PAC file needs its site under a name; tests cannot edit /etc/hosts, so the proxy is told here
where the name points (Chromium is told with `--host-resolver-rules`). Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

from mitmproxy.proxy import server_hooks

SUFFIX = ".test"


class SiteNames:
    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        address = data.server.address
        if address is not None and address[0].endswith(SUFFIX):
            data.server.address = ("127.0.0.1", address[1])


addons = [SiteNames()]
