"""The proxy's CA as mitmproxy makes and reads it, for the workers of `serve --ray`: a browser that
trusts one worker's CA trusts every worker's (docs/architecture.md, Ray)."""

from __future__ import annotations

from pathlib import Path

from mitmproxy.certs import CertStore


def ca_files(mitmproxy_options: list[str]) -> dict[str, bytes]:
    """This machine's mitmproxy CA files by name (made in the `confdir` of the given `--set` options,
    default `~/.mitmproxy`, if there is none yet)."""
    confdir = Path("~/.mitmproxy")
    for setting in mitmproxy_options:
        name, _, value = setting.partition("=")
        if name.strip() == "confdir":
            confdir = Path(value)
    confdir = confdir.expanduser()
    CertStore.from_store(confdir, "mitmproxy", 2048)
    return {path.name: path.read_bytes() for path in confdir.glob("mitmproxy-ca*")}
