"""The mitmproxy addon: sessions from proxy credentials, one event per flow, the control API.

Loaded by `webarena-live serve` and by `mitmdump -s "$(webarena-live addon-path)"`; it changes no
process-wide setting (garbage-collector tuning is `serve`'s, see addon/commands/process_memory.py).
Options carry a `webarena_` prefix. Traffic is assigned to a session by the username of its proxy
credentials (docs/architecture.md, Capture). Like mitmproxy's own `proxyauth`, the name is remembered
per client connection, so requests inside an HTTPS tunnel (HTTP/1 or HTTP/2), which never repeat the
credentials, land in the session named on the CONNECT.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from mitmproxy import connection, ctx, exceptions, http
from mitmproxy.proxy import server_hooks

from webarena_live.control.app import create_app
from webarena_live.control.authority import WATCH_SECONDS, Authority
from webarena_live.control.context import RESERVED_HOST, ControlContext
from webarena_live.control.server import ControlServer
from webarena_live.evaluator import EventRecord, SiteMap
from webarena_live.proxy.browser_traffic import BrowserServices, answer_own
from webarena_live.proxy.capture import record_from_flow, tunnel_failure_event
from webarena_live.proxy.connections import (
    BROWSER_KEY,
    CAPTURED_KEY,
    CHALLENGED_KEY,
    SESSION_KEY,
    SKIP_KEY,
    ClientConnections,
)
from webarena_live.proxy.credentials import challenge
from webarena_live.proxy.faults import FaultInjector
from webarena_live.proxy.flow_notes import FlowNotes
from webarena_live.proxy.header_login import HeaderLogin
from webarena_live.proxy.lease_checks import authority_of, hold
from webarena_live.proxy.lease_checks import check as check_lease
from webarena_live.proxy.lease_checks import record as record_mutation
from webarena_live.proxy.options import BODY_CAP, OPTIONS, RECONFIGURING, advertise_host_problem
from webarena_live.proxy.own_listeners import OwnListeners
from webarena_live.proxy.reserved_host import route_control, serve_on_flow
from webarena_live.proxy.session_addresses import SessionAddresses
from webarena_live.proxy.startup import (
    dataset_line,
    front_address,
    header_login_warnings,
    listen_ports,
    read_options,
    unfinished_lines,
)
from webarena_live.runs.fault_plan import FAULT_KEY
from webarena_live.runs.journal import TurnWrites
from webarena_live.runs.sessions import DEFAULT_SESSION, Session, SessionStore
from webarena_live.sites import SitesPlan

logger = logging.getLogger(__name__)

__all__ = ["BROWSER_KEY", "CAPTURED_KEY", "CHALLENGED_KEY", "SESSION_KEY", "SKIP_KEY", "WebArenaLive"]

Captured = tuple[Session, EventRecord, http.HTTPFlow]  # a flow's record, for the end of its loop turn


class WebArenaLive:
    """Evaluate agents live: capture every flow into its session's trace, serve the control API."""

    def __init__(self) -> None:
        self.context: ControlContext | None = None
        self.app = create_app(None)
        """The control app, served on the control port and at the reserved host through the proxy."""
        self.server: ControlServer | None = None
        self.body_cap = BODY_CAP
        self.finish_guard: Callable[[], AbstractContextManager[object]] = nullcontext
        """Wraps every finish (`ControlContext.finish_guard`); set by the host, before configuring."""
        self.extra_health: dict[str, Any] = {}
        """More of `/health`'s answer: the control port, and what the host adds."""
        self.flow_notes: FlowNotes | None = None
        """Comments and marks on captured flows for mitmweb; None unless `webarena_annotate_flows`."""
        self.header_login = HeaderLogin()
        self.browser_services = BrowserServices()
        self.addresses = SessionAddresses()
        self.connections = ClientConnections(self.addresses, self.extra_health)
        """Which session each client connection belongs to (`proxy/connections.py`)."""
        self._front: tuple[str, int] | None = None
        self.confine = False
        self._watcher: asyncio.Task[None] | None = None
        """Ends the leases idle past `--lease-timeout` (`Authority.expire_idle`), whichever authority
        the current configuration holds."""
        self.started = False
        """The proxy runs (`running` was called): a reconfiguration from now on says what it loaded."""
        self.captures: TurnWrites[Captured] = TurnWrites(self._record, released=self._released)
        """Each loop turn's captured flows, recorded and journaled together right after it."""
        self.faults = FaultInjector(self)  # its per-flow steps called from `request`, `response`, `error`
        self.addons: list[object] = [self.faults]
        """mitmproxy's sub-addons: the faults' option, and what a host adds to ride on this one entry of
        mitmproxy's chain (`serve`'s; each entry costs every event of every flow)."""
        self.flow_done: Callable[[http.HTTPFlow], None] | None = None
        """A host's per-flow step, told of each flow once its answer (or error) is in (serve's)."""

    # --- options -------------------------------------------------------------------------------

    def load(self, loader: object) -> None:
        for option in OPTIONS:
            loader.add_option(option.name, option.type, option.default, option.help)  # type: ignore[attr-defined]

    def configure(self, updated: set[str]) -> None:
        if not ctx.options.webarena_annotate_flows:
            self.flow_notes = None
        elif self.flow_notes is None:
            self.flow_notes = FlowNotes()
        self.browser_services.forward = ctx.options.webarena_forward_browser_traffic
        if problem := advertise_host_problem(ctx.options.webarena_advertise_host):
            raise exceptions.OptionsError(f"webarena_advertise_host: {problem}")
        if "webarena_front" in updated:
            self._front = front_address(ctx.options.webarena_front)
        if self.context is not None and not updated.intersection(RECONFIGURING):
            return
        options = ctx.options
        if options.webarena_body_cap < 0:
            raise exceptions.OptionsError("webarena_body_cap must not be negative")
        tasks, settings, authority = read_options(options, self._authority)
        if authority.log is not None:  # a kept log (the same URLs) takes the new map's rules
            authority.log.judge_by(settings.site_map)
        site_map = settings.site_map
        reserved = frozenset(
            [*listen_ports(options.mode, options.listen_port), options.webarena_control_port]
        )
        self.addresses.configure(ports=options.webarena_session_ports, reserved=reserved)
        if self.context is None:
            sessions = SessionStore(settings)
            self.addresses.attach(sessions)
        else:  # reconfigured while running: sessions live on; attempts started from now on use these
            sessions = self.context.sessions
            sessions.settings = settings
        self.header_login.use(site_map)
        self.browser_services.use(url for urls in site_map.urls.values() for url in urls)
        for line in header_login_warnings(site_map):
            logger.warning(line)
        self.context = ControlContext(
            tasks=tasks,
            sessions=sessions,
            token=options.webarena_control_token or None,
            extra_health=self.extra_health,
            finish_guard=self.finish_guard,
            addresses=self.addresses,
            authority=authority,
        )
        self.confine = options.webarena_confine
        self.app.state.control = self.context  # options changed while running: both ways in serve it
        self.body_cap = options.webarena_body_cap
        self.connections.session_port = options.webarena_session_port
        if self.started:  # at start the line waits for `running`: options given after this one may fail
            self._tell_dataset()
            authority.start()

    def _authority(
        self, site_map: SiteMap, output_dir: Path | None, journal_dir: Path, copies: SitesPlan | None = None
    ) -> Authority:
        current = self.context.authority if self.context is not None else None
        return authority_of(
            site_map, ctx.options, current, copies=copies, output_dir=output_dir, journal_dir=journal_dir
        )

    def _tell_dataset(self) -> None:
        assert self.context is not None
        logger.info(dataset_line(self.context.tasks, self.context.settings))

    async def running(self) -> None:
        if (proxyserver := ctx.master.addons.get("proxyserver")) is not None:
            OwnListeners.install(proxyserver)  # its loop check at constant cost, whatever the sessions
        if self.context is not None and not self.started:
            self._tell_dataset()
        self.started = True
        if self.context is not None:
            self.context.authority.start()  # the resets a restart found needed, before the first lease
        if self.context is not None and self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch_idle())
        options = ctx.options
        if self.context is None or not options.webarena_control_port or self.server is not None:
            return
        port = options.webarena_control_port
        server = ControlServer(self.app, host=options.webarena_control_host, port=port)
        try:
            await server.start()
        except OSError as error:
            # Logged as an error during startup, which makes mitmdump exit with a message.
            logger.error("webarena-live: cannot open the control port %s: %s", port, error)
            return
        self.server = server
        self.extra_health["control_port"] = server.port
        logger.info("webarena-live: control API on http://%s:%d/", server.host, server.port)

    async def _watch_idle(self) -> None:
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            if self.context is not None:
                self.context.authority.expire_idle()

    async def done(self) -> None:
        self.captures.flush()  # the last turn's lines before the journals close
        if self._watcher is not None:
            self._watcher.cancel()
        if self.server is not None:
            await self.server.stop()
            self.server = None
        if self.context is not None:
            for line in unfinished_lines(self.context.sessions):
                logger.warning(line)
            self.context.sessions.close()
            await self.context.authority.close()  # its container copies removed, unless kept

    # --- session assignment --------------------------------------------------------------------

    def client_connected(self, client: connection.Client) -> None:
        self.connections.connected(client)

    def client_disconnected(self, client: connection.Client) -> None:
        self.connections.disconnected(client)

    def http_connect(self, flow: http.HTTPFlow) -> None:
        flow.metadata[SKIP_KEY] = True  # the tunnel itself is no event; the requests inside it are
        if (claimed := self.connections.claim(flow)) is None:
            return  # a stranger's, answered
        name, problem = claimed
        if problem or (name is None and self.connections.on_session_port(flow)):
            flow.response = challenge(problem) if problem else challenge()
            flow.metadata[CHALLENGED_KEY] = True
            return
        flow.metadata[SESSION_KEY] = name
        self._answer_browser_service(flow, name)

    def _answer_browser_service(self, flow: http.HTTPFlow, session: str | None) -> bool:
        context, services = self.context, self.browser_services
        return context is not None and answer_own(services, context.sessions, flow, session)

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        """No connection to a browser service leaves this proxy unless asked for (a request that reached
        here some other way than the hooks above answer: refused before any name lookup)."""
        address = data.server.address
        if address is not None and self.browser_services.answers(str(address[0])):
            data.server.error = "webarena-live: the browser's own service traffic is not forwarded"

    def _not_a_site(self, url: str) -> bool:
        assert self.context is not None
        return self.context.site_map.derender(url, strict=False) == url

    def http_connect_error(self, flow: http.HTTPFlow) -> None:
        """A tunnel to one of the task sites that could not be opened (connection refused, DNS):
        the only trace of the request the client meant to send inside it, so it becomes an event
        with status 0. Tunnels to hosts outside the site map are left out: browsers open them
        on their own (Chromium's autofill and update checks), and on a machine without
        internet access every one of them fails."""
        if flow.metadata.get(CHALLENGED_KEY) or flow.metadata.get(BROWSER_KEY) or self.context is None:
            return
        event = tunnel_failure_event(flow)
        name = flow.metadata.get(SESSION_KEY) or DEFAULT_SESSION
        if self._not_a_site(event.url):  # not a site of any task: named if its session captures nothing
            if (session := self.context.sessions.get(name)) is not None:
                session.attempt.unmapped.note(f"{flow.request.host}:{flow.request.port}")
            return
        self.context.sessions.get_or_create(name).append(event)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        is_control = flow.request.host == RESERVED_HOST
        conns = self.connections
        if (claimed := conns.claim(flow)) is None:
            return  # a stranger's, answered
        username, problem = claimed
        if problem or (username is None and not is_control and conns.on_session_port(flow)):
            flow.metadata[SKIP_KEY] = True
            flow.response = challenge(problem) if problem else challenge()
            return
        if is_control:
            flow.metadata[SKIP_KEY] = True
            self._route_control(flow, username)
        elif self._answer_browser_service(flow, username):
            return
        flow.metadata[SESSION_KEY] = username
        if self.header_login.by_origin:  # called from here, not as an addon: no hook dispatch per flow
            self.header_login.requestheaders(flow)
        if not is_control and self.context is not None:
            session = self.context.sessions.get(username or DEFAULT_SESSION)
            if session is not None and session.attempt.lease is not None:
                if hold(self.context, session, flow):  # its lease ended: answered here, no event of its trace
                    flow.metadata[SKIP_KEY] = True
                else:
                    check_lease(self.context, session, flow, confine=self.confine)

    def _route_control(self, flow: http.HTTPFlow, caller: str | None) -> None:
        server = (self.server.host, self.server.port) if self.server is not None else None
        # mitmproxy's streambodies addon declares the option; a host without it streams nothing
        streaming = getattr(ctx.options, "stream_large_bodies", None)
        token = ctx.options.webarena_control_token or None
        route_control(flow, caller, front=self._front, server=server, streaming=streaming, fleet_token=token)

    # --- control API through the proxy ---------------------------------------------------------

    def request(self, flow: http.HTTPFlow) -> Awaitable[Any] | None:
        # Not `async def`: every proxied flow passes here, and only the reserved host's and a paused
        # fault's need an awaitable (mitmproxy awaits what a hook returns).
        if self.context is None:
            return None
        if flow.response is not None or flow.request.host != RESERVED_HOST:
            return self.faults.on_request(flow)  # one answered already is only counted
        flow.metadata[SKIP_KEY] = True
        # Raw bytes, as on the control port: never decompressed (a small gzip bomb would expand in
        # memory); a compressed body simply fails the JSON check with a 400.
        return serve_on_flow(self.app, flow, caller=flow.metadata.get(SESSION_KEY))

    # --- capture -------------------------------------------------------------------------------

    def response(self, flow: http.HTTPFlow) -> Awaitable[Any] | None:
        # Captured here, before mitmproxy sends the response on: mitmproxy awaits what this returns,
        # so the event's journal line is with the operating system before the agent sees the answer
        # (see `Journal`). The line is written with the rest of this loop turn's (`TurnWrites`).
        captured = None if flow.metadata.get(SKIP_KEY) else self._capture(flow)
        if captured is None and self.flow_done is not None:  # a captured flow's: once released (`_released`)
            self.flow_done(flow)
        return self.faults.on_response(flow, captured) if FAULT_KEY in flow.metadata else captured

    def error(self, flow: http.HTTPFlow) -> asyncio.Future[None] | None:
        skip = flow.metadata.get(SKIP_KEY) or flow.metadata.get(CAPTURED_KEY)
        self.faults.on_error(flow)  # one that ended before its `request` hook counts for the draws
        captured = None if skip else self._capture(flow)
        # A captured flow's is told once released (`_released`); one with a response whose `response`
        # hook ran was told there (one whose body broke off before that hook is captured here).
        done = self.flow_done
        if captured is None and done is not None and flow.response is None:
            done(flow)
        return captured

    def _capture(self, flow: http.HTTPFlow) -> asyncio.Future[None] | None:
        if self.context is None or flow.is_replay:
            return None
        flow.metadata[CAPTURED_KEY] = True
        name = flow.metadata.get(SESSION_KEY) or DEFAULT_SESSION
        own = self.browser_services.is_own(flow.request.host)  # forwarded (--forward-browser-traffic)
        event: EventRecord | None = None
        try:
            event = None if own else record_from_flow(flow, body_cap=self.body_cap)
        finally:  # the pool hears of every flow, even one whose record could not be made
            try:
                record_mutation(self.context, name, flow, event)
            except Exception:  # the pool's bookkeeping never costs the trace an event
                logger.exception(
                    "webarena-live: recording %s %s for the pool failed",
                    flow.request.method,
                    flow.request.url,
                )
        session = self.context.sessions.get_or_create(name)
        if event is None:  # a browser service's (`own`): listed in the session, no event of its trace
            session.attempt.note_browser_request(flow.request.method, flow.request.url)
            return None
        return self.captures.add((session, event, flow))

    def _released(self, captured: Captured) -> None:
        """A captured flow whose answer `TurnWrites` has just released: told to `flow_done`, so what that
        starts (a collection) is queued behind the answers, never before them."""
        if self.flow_done is not None:
            self.flow_done(captured[2])

    def _record(self, captured: Captured) -> None:
        """Into the session's trace and journal (`TurnWrites.flush`, right after the flow's loop turn)."""
        session, record, flow = captured
        if session.append(record) and self.flow_notes is not None:
            self.flow_notes.captured(flow, session)
