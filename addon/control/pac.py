"""A session's proxy auto-config file: its traffic to its own address, static assets straight to the site.

The reference's evaluation never reads a request whose URL path ends in one of its static-asset
suffixes (its `trim-network-logs` removes them from HARs), so those may skip the proxy. Browsers
hand a PAC script the full URL of `http://` requests only; of `https://` ones they hand the host
alone, so an `https://` request can never be told apart and always goes through the proxy.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from webarena_live.evaluator import STATIC_ASSET_SUFFIXES

PAC_MEDIA_TYPE = "application/x-ns-proxy-autoconfig"

_TEMPLATE = """\
// webarena-live: the session's requests go to its own proxy address, except static assets of
// http:// URLs (URL path ending in one of SUFFIXES), which evaluation never reads: DIRECT.
var SUFFIXES = %(suffixes)s;
function FindProxyForURL(url, host) {
  if (url.substring(0, 7) === "http://") {
    var path = url.substring(7);
    var slash = path.indexOf("/");
    path = slash < 0 ? "" : path.substring(slash);
    var cut = path.search(/[?#]/);
    if (cut >= 0) path = path.substring(0, cut);
    for (var i = 0; i < SUFFIXES.length; i++) {
      var suffix = SUFFIXES[i];
      if (path.length >= suffix.length && path.substring(path.length - suffix.length) === suffix) {
        return "DIRECT";
      }
    }
  }
  return "PROXY %(proxy)s";
}
"""


def proxy_auto_config(proxy_url: str) -> str:
    """The PAC script for a session whose own proxy address is `proxy_url` (`http://HOST:PORT`)."""
    netloc = urlsplit(proxy_url).netloc
    return _TEMPLATE % {"suffixes": json.dumps(list(STATIC_ASSET_SUFFIXES)), "proxy": netloc}
