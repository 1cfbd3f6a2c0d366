"""The one seam to a container engine: what the copies ask of one (`Engine`), and its implementation
over the Docker Engine API (`DockerEngine`), which the Docker Engine and Podman's Docker-compatible
service both serve (docs/architecture.md, Copies as containers). Another backend (Kubernetes pods from a
warm pool, say) implements the same five calls.

The product runs no container itself: it asks the engine to create, inspect and remove them. The
`docker` package is the maintained client of that API (the one Docker publishes); it talks to a local
socket, `tcp://` and, with the system's `ssh`, `ssh://` alike. Its calls block, so the copies call them
in a thread (`asyncio.to_thread`), one at a time per engine.
"""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from webarena_live.evaluator import WebArenaLiveError
from webarena_live.sites.plan import LABEL, CopyPlan

ENGINE_TIMEOUT = 120
"""Seconds one call to an engine may take (a container's removal waits for it to stop)."""
API_VERSION = "1.41"
"""The Docker Engine API version asked for: Podman 4's compatible service answers it, and so does every
Docker Engine since 20.10. Named, because a client left to find it asks the engine's `/version`, which
Podman takes seconds to answer."""
STOP_SECONDS = 5
"""Seconds a removed copy is given to stop before it is killed: its data is thrown away anyway."""


class EngineError(WebArenaLiveError):
    """An engine could not do what a copy needed: one line that names the engine and what to do."""


@dataclass(frozen=True)
class ContainerState:
    """A container as its engine reports it."""

    name: str
    id: str
    status: str
    """`created`, `running`, `exited`, ... (the engine's own word)."""
    labels: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    oom_killed: bool = False
    started_at: str | None = None
    own_volumes: tuple[str, ...] = ()
    """The named volumes it mounts that are its own (named after it: `<name>-<target>`)."""

    @property
    def running(self) -> bool:
        return self.status == "running"

    def why_not_running(self) -> str:
        if self.oom_killed:
            return (
                f"its container {self.name} was killed for want of memory (OOM, exit code {self.exit_code})"
            )
        return f"its container {self.name} is {self.status}" + (
            f" (exit code {self.exit_code})" if self.exit_code is not None else ""
        )


class Engine(ABC):
    """What the copies ask of a container engine."""

    url: str

    @abstractmethod
    def run(self, copy: CopyPlan) -> ContainerState:
        """Create and start `copy`'s container (its own volumes made empty first)."""

    @abstractmethod
    def inspect(self, name: str) -> ContainerState | None:
        """The container named `name`, or None when there is none."""

    @abstractmethod
    def remove(self, name: str, volumes: list[str]) -> bool:
        """Remove the container `name` (stopped first, killed when slow) and the named `volumes`; what is
        already gone is no error. Whether there was a container to remove."""

    @abstractmethod
    def listed(self, prefix: str) -> list[ContainerState]:
        """Every container, running or not, whose `webarena-live.name` label is `prefix`."""

    @abstractmethod
    def check(self) -> str | None:
        """Why the engine cannot be asked (unreachable, refusing), in one line; None when it answers."""

    @abstractmethod
    def close(self) -> None: ...


def _state(container: Any) -> ContainerState:
    attrs = container.attrs or {}
    state = attrs.get("State") or {}
    name = (attrs.get("Name") or container.name or "").lstrip("/")
    return ContainerState(
        name=name,
        id=container.id,
        status=str(state.get("Status") or container.status),
        labels=dict((attrs.get("Config") or {}).get("Labels") or {}),
        exit_code=state.get("ExitCode") if state.get("Status") != "running" else None,
        oom_killed=bool(state.get("OOMKilled")),
        started_at=state.get("StartedAt"),
        own_volumes=tuple(
            mount["Name"] for mount in attrs.get("Mounts") or ()
            if mount.get("Type") == "volume" and str(mount.get("Name", "")).startswith(f"{name}-")
        ),
    )  # fmt: skip


class DockerEngine(Engine):
    """An engine reached through the Docker Engine API (Docker, or Podman's `system service`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: Any = None
        self._lock = threading.Lock()

    def _docker(self) -> Any:
        if self._client is None:
            try:
                import docker
            except ImportError as error:  # a dependency: only a broken install lacks it
                raise EngineError(f"the docker package is missing ({error}): pip install docker") from None
            try:
                self._client = docker.DockerClient(
                    base_url=self.url,
                    version=API_VERSION,
                    timeout=ENGINE_TIMEOUT,
                    use_ssh_client=self.url.startswith("ssh://"),
                )
                self._client.ping()
            except Exception as error:
                self._client = None
                raise EngineError(
                    f"cannot reach the container engine at {self.url}: {error}. Start one there (Podman: "
                    f"`podman system service --time=0 {self.url}`; Docker: its daemon), or name another "
                    'in the site map\'s "engines"'
                ) from None
        return self._client

    def _call(self, what: str, call: Any) -> Any:
        import docker.errors

        with self._lock:
            client = self._docker()
            try:
                return call(client)
            except docker.errors.ImageNotFound as error:
                raise EngineError(f"{self.url}: {what}: no such image ({error.explanation})") from None
            except docker.errors.APIError as error:
                raise EngineError(f"{self.url}: {what}: {error.explanation or error}") from None
            except Exception as error:  # the connection: requests' and urllib3's errors
                raise EngineError(f"{self.url}: {what}: {type(error).__name__}: {error}") from None

    def run(self, copy: CopyPlan) -> ContainerState:
        import docker.types

        def run(client: Any) -> ContainerState:
            for name in copy.own_volumes:
                client.volumes.create(name=name, labels={f"{LABEL}.name": copy.prefix})
            try:
                client.images.get(copy.image)
            except Exception:
                client.images.pull(copy.image)  # Docker pulls on create only from the CLI
            container = client.containers.run(
                copy.image,
                name=copy.name,
                detach=True,
                labels=copy.labels,
                environment=dict(copy.env),
                # published on loopback when the copy is reached there: nothing outside this machine sees it
                ports={
                    f"{inner}/tcp": (copy.bind, outer) if copy.bind else outer for inner, outer in copy.ports
                },
                volumes={
                    source: {"bind": target, "mode": "ro" if mode == "shared-ro" else "rw"}
                    for source, target, mode in copy.volumes
                },
                ulimits=[docker.types.Ulimit(name=n, soft=v, hard=v) for n, v in copy.ulimits],
            )
            container.reload()
            return _state(container)

        return self._call(f"run {copy.name} from {copy.image}", run)

    def inspect(self, name: str) -> ContainerState | None:
        import docker.errors

        def inspect(client: Any) -> ContainerState | None:
            try:
                return _state(client.containers.get(name))
            except docker.errors.NotFound:
                return None

        return self._call(f"inspect {name}", inspect)

    def remove(self, name: str, volumes: list[str]) -> bool:
        import docker.errors

        def remove(client: Any) -> bool:
            try:
                container = client.containers.get(name)
            except docker.errors.NotFound:
                container = None
            if container is not None:
                with contextlib.suppress(docker.errors.APIError):  # not running: removed all the same
                    container.stop(timeout=STOP_SECONDS)
                with contextlib.suppress(docker.errors.NotFound):
                    container.remove(force=True)
            for volume in volumes:
                with contextlib.suppress(docker.errors.NotFound):
                    client.volumes.get(volume).remove(force=True)
            return container is not None

        return bool(self._call(f"remove {name}", remove))

    def listed(self, prefix: str) -> list[ContainerState]:
        def listed(client: Any) -> list[ContainerState]:
            found = client.containers.list(all=True, filters={"label": f"{LABEL}.name={prefix}"})
            return [_state(container) for container in found]

        return self._call(f"list the copies named {prefix}", listed)

    def check(self) -> str | None:
        try:
            with self._lock:
                self._docker()
        except EngineError as error:
            return str(error)
        return None

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
