"""What the addon checks and tells when it starts and stops: options read into settings, problems told
all at once, the unfinished sessions a stop leaves.

Pure functions over the options' values and the sessions (mitmproxy only for its mode syntax and
its option error), tested directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mitmproxy import exceptions
from mitmproxy.proxy import mode_specs

from webarena_live.evaluator import SiteMap, TaskSet, WebArenaLiveError, load_tasks, prepare_output_dir
from webarena_live.replicas.memory import state_dir
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings, SessionState
from webarena_live.sites import load_site_map

T = TypeVar("T")

JOURNAL_SUBDIR = ".journal"
"""Journal directory inside the output dir; not a task id, so the reference tooling skips it."""


def default_journal_dir(output_dir: str) -> Path:
    """`OUT/.journal`, else a stable per-user state directory, so a restarted proxy finds its journals."""
    if output_dir:
        return Path(output_dir) / JOURNAL_SUBDIR
    return state_dir() / "journal"


def checked(problems: list[str], load: Callable[[Any], T], argument: Any) -> T | None:
    """`load(argument)`, or None with the error's lines added to `problems` (so all are told at once)."""
    try:
        return load(argument)
    except WebArenaLiveError as error:
        problems.extend(str(error).splitlines())
        return None


def read_options(options: Any, make_authority: Callable[..., T]) -> tuple[TaskSet, RunSettings, T]:
    """The addon's options read together: the tasks, the settings every attempt reads, and the lease
    authority `make_authority(site_map, output_dir, journal_dir)` builds on them (`control/authority.py`:
    the replica pool, or a worker's view of its front's), given `copies=` the plan of the map's container
    copies when it has some (`webarena_live.sites`). Raises `OptionsError` with every problem found, one
    a line, so all are told at once."""
    problems: list[str] = []
    tasks = checked(problems, load_tasks, options.webarena_tasks or None)
    config, out = options.webarena_config, options.webarena_output_dir
    loaded = checked(problems, load_site_map, config) if config else None
    site_map, copies = loaded if loaded is not None else (None, None)
    output_dir = checked(problems, prepare_output_dir, out) if out else None
    if tasks is not None and (site_map is not None or not config):  # an unreadable map: told once
        problems += site_map_problems(tasks, site_map or SiteMap(), config=config)
    site_map = site_map or SiteMap()
    journal_dir = Path(options.webarena_journal_dir or default_journal_dir(out))
    made: list[T] = []
    try:
        given = {"copies": copies} if copies else {}
        made.append(make_authority(site_map, output_dir, journal_dir, **given))
    except WebArenaLiveError as error:
        problems.extend(str(error).splitlines())
    if problems or tasks is None:
        raise exceptions.OptionsError("\n".join(problems))
    settings = RunSettings(
        site_map=site_map,
        output_dir=output_dir,
        journal_dir=journal_dir,
        redact=options.webarena_redact,
        data_checksum=tasks.checksum,
    )
    return tasks, settings, made[0]


def unfinished_lines(sessions: SessionStore) -> list[str]:
    """What stopping now leaves unfinished, and how to pick each session up after a restart."""
    lines = []
    for session in sessions:
        task = session.task
        if session.state is not SessionState.RUNNING or task is None or not len(session.trace):
            continue
        journal = session.attempt.journal
        where = f", journal {journal.path}" if journal is not None else ""
        resume = json.dumps({"task_id": task.task_id, "session": session.name, "resume_journal": True})
        lines.append(
            f"unfinished: session {session.name}, task {task.task_id}, {len(session.trace)} events{where}; "
            f"after a restart resume it with POST /sessions {resume}"
        )
    return lines


def dataset_line(tasks: TaskSet, settings: RunSettings) -> str:
    """The line a start (and a reconfiguration while running) logs: the tasks loaded, the journal's place."""
    return f"webarena-live: {len(tasks)} tasks from {tasks.source}; journal in {settings.journal_dir}"


def header_login_warnings(site_map: SiteMap) -> list[str]:
    """A line for each site of the map that logs in by header but has no credentials to send."""
    return [
        f"webarena-live: {name} has use_header_login but no credentials: no header is added"
        for name in site_map.header_login_without_credentials
    ]


def site_map_problems(tasks: TaskSet, site_map: SiteMap, *, config: str) -> list[str]:
    """Sites the loaded tasks use that the site map cannot render, one line each (empty: fine).

    The embedded demo tasks run without a map (their start URLs stay placeholders
    until `webarena-live demo` or a user's config names the demo shop); a map that
    is given must cover every site the tasks use.
    """
    if not config and tasks.is_embedded_demo:
        return []
    where = config or "no --config given"
    problems = []
    for name, ids in sorted(tasks.sites_missing_from(site_map).items()):
        shown = ", ".join(str(i) for i in ids[:5]) + (", …" if len(ids) > 5 else "")
        problems.append(f"{where}: no URLs for {name}, which {len(ids)} task(s) use ({shown})")
    return problems


def listen_ports(modes: Sequence[str], listen_port: int | None) -> Iterator[int]:
    """The ports mitmproxy's modes listen on (never handed to a session)."""
    for mode in modes:
        try:
            port = mode_specs.ProxyMode.parse(mode).listen_port(listen_port)
        except ValueError:
            continue  # mitmproxy reports it
        if port:
            yield port


def front_address(text: str) -> tuple[str, int] | None:
    """`webarena_front` (`HOST:PORT`) as an address; None when empty."""
    if not text:
        return None
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise exceptions.OptionsError(f"webarena_front must be HOST:PORT, not {text!r}")
    return host, int(port)
