"""The headers webarena-live's own parts send each other, in one place: the fleet's front, its workers'
control API and the proxy's reserved host all read these names (docs/architecture.md, Workers).

None of them is a client's to send: the front drops a client's copy of each it sets (`FRONT_SET`), and
the proxy's reserved host drops a client's caller, client and fleet headers.
"""

from __future__ import annotations

PROXY_PORT_HEADER = "X-WebArena-Live-Proxy-Port"
"""Set by the workers' front on `POST /sessions`: the port the placement chose for the session's
address. Without it the proxy picks one itself."""
CLIENT_HEADER = "X-WebArena-Live-Client"
"""Set by the workers' front on `POST /sessions`: the address of the client that asked, which the
session's address lets in (proxy/strangers.py)."""
LEASE_HEADER = "X-WebArena-Live-Lease"
"""Set by the workers' front on the `POST /sessions` it forwards: the session's lease, `{site: index}`."""
INTERFERENCE_HEADER = "X-WebArena-Live-Interference"
"""Set by the workers' front on the finish and preview it forwards: the session's interference, as
the front's pool names it (`control/wire.py`: `encode_interference`)."""
FLEET_HEADER = "X-WebArena-Live-Fleet"
"""Set by a worker of `serve --ray` on the control requests it passes to the front: the fleet's token,
which the front's door for its workers asks for (fleet/front/door.py)."""
CALLER_HEADER = "X-WebArena-Live-Caller"
"""Set by the addon on control requests through the proxy: the caller's session (percent-encoded),
from the proxy credentials. It only picks the session `POST /sessions` starts when its body names
none, which any client of the control port can do anyway, so it needs no protection there."""
REPEATED_HEADER = "X-WebArena-Live-Repeated"
"""On a finish's answer that is the first finish's again (the same answer sent twice): the front
forwards it and does none of a first finish's work again (carrying files, ending leases)."""
SESSION_HEADER = "X-WebArena-Live-Session"
"""On a finish's answer: the session's name, percent-encoded."""
EARLIER_ATTEMPT_HEADER = "X-WebArena-Live-Earlier-Attempt"
"""On a finish's answer: where an earlier attempt's files of the same task were moved aside."""

FRONT_SET = frozenset(
    name.lower() for name in (PROXY_PORT_HEADER, CLIENT_HEADER, LEASE_HEADER, INTERFERENCE_HEADER)
)
"""What only the front sets on what it forwards to a worker: a client's own copies never go through."""
