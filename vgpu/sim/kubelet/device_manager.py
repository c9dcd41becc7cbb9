"""A fake kubelet device manager: the other end of the device-plugin API, for tests and the demo.

It behaves like the real kubelet where our plugin can observe it
(docs/kubelet-api.md §5):

- serves ``Registration`` on ``<dir>/kubelet.sock``; ``Register`` rejects unsupported
  versions and non-extended resource names, then — asynchronously, like the kubelet —
  connects to ``<dir>/<endpoint>``, calls ``GetDevicePluginOptions`` and follows
  ``ListAndWatch`` with gRPC's default 4 MiB receive limit;
- ``restart()`` does what a kubelet restart does to the directory: stop, delete every
  non-directory entry except the checkpoint file, and create a new ``kubelet.sock``;
- the test (or demo) can call ``Allocate``, ``GetPreferredAllocation`` and
  ``PreStartContainer`` through ``PluginClient``.

Everything it starts is stopped by ``stop()`` (also via ``with FakeKubelet(...)``).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures
from dataclasses import dataclass, field

import grpc

from vgpu.plugin.api import (
    HEALTHY,
    KUBELET_CHECKPOINT,
    KUBELET_MAX_RECEIVE_BYTES,
    PRE_START_CONTAINER_TIMEOUT_S,
    SUPPORTED_VERSIONS,
    pb,
    pb_grpc,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Registration:
    """One ``Register`` call as the kubelet received it."""

    version: str
    endpoint: str
    resource_name: str
    pre_start_required: bool
    get_preferred_allocation_available: bool
    at: float  # time.monotonic() of arrival
    accepted: bool
    error: str = ""


def is_extended_resource_name(name: str) -> bool:
    """Roughly the kubelet's check: ``<domain>/<name>``, not in the kubernetes.io namespace."""
    if name.count("/") != 1:
        return False
    domain, short = name.split("/")
    if not domain or not short or domain.startswith("requests."):
        return False
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


class PluginClient:
    """The kubelet's connection to one registered plugin and its ListAndWatch view."""

    def __init__(
        self, socket_dir: str, registration: Registration, max_receive_bytes: int = KUBELET_MAX_RECEIVE_BYTES
    ) -> None:
        self.registration = registration
        self.resource_name = registration.resource_name
        self.socket_path = os.path.join(socket_dir, registration.endpoint)
        self.channel = grpc.insecure_channel(
            f"unix:{self.socket_path}", options=[("grpc.max_receive_message_length", max_receive_bytes)]
        )
        self.stub = pb_grpc.DevicePluginStub(self.channel)
        self.options: pb.DevicePluginOptions | None = None
        self.devices: list[tuple[str, str]] = []  # latest list: (ID, health)
        self.updates = 0  # ListAndWatch messages received
        self.history: list[tuple[float, list[tuple[str, str]]]] = []
        self.keep_history = True
        self.stream_error: str | None = None  # why the stream ended, if it did
        self.closed = False
        self._cond = threading.Condition()
        self._stream: grpc.Future | None = None
        self._thread: threading.Thread | None = None

    def connect(self, timeout: float = 5.0) -> None:
        self.options = self.stub.GetDevicePluginOptions(pb.Empty(), timeout=timeout, wait_for_ready=True)
        self._stream = self.stub.ListAndWatch(pb.Empty())
        self._thread = threading.Thread(target=self._follow, name=f"kubelet-law-{self.resource_name}", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        assert self._stream is not None
        try:
            for msg in self._stream:
                devices = [(d.ID, d.health) for d in msg.devices]
                with self._cond:
                    self.devices = devices
                    self.updates += 1
                    if self.keep_history:
                        self.history.append((time.monotonic(), devices))
                    self._cond.notify_all()
            error = "stream ended by the plugin"
        except grpc.RpcError as exc:
            error = f"{exc.code().name}: {exc.details()}"
        with self._cond:
            # The kubelet marks every device of a resource unhealthy when its stream ends.
            self.stream_error = error
            self._cond.notify_all()
        if not self.closed:
            log.info("fake kubelet: ListAndWatch of %s ended: %s", self.resource_name, error)

    # -- observing ---------------------------------------------------------------------

    def wait_until(self, predicate: Callable[[PluginClient], bool], timeout: float) -> bool:
        """Poll-free wait (condition variable) until ``predicate(self)`` holds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def wait_for_update(self, after: int, timeout: float) -> bool:
        return self.wait_until(lambda c: c.updates > after, timeout)

    def healthy_ids(self) -> list[str]:
        with self._cond:
            return [i for i, h in self.devices if h == HEALTHY]

    def allocatable(self) -> int:
        """What the kubelet would report as allocatable for this resource."""
        with self._cond:
            if self.stream_error is not None:
                return 0
            return sum(1 for _, h in self.devices if h == HEALTHY)

    # -- calling -----------------------------------------------------------------------

    def allocate(self, container_devices: Sequence[Iterable[str]], timeout: float = 10.0) -> pb.AllocateResponse:
        return self.stub.Allocate(
            pb.AllocateRequest(
                container_requests=[pb.ContainerAllocateRequest(devices_ids=list(ids)) for ids in container_devices]
            ),
            timeout=timeout,
        )

    def get_preferred_allocation(
        self, available: Iterable[str], must_include: Iterable[str], size: int, timeout: float = 10.0
    ) -> list[str]:
        resp = self.stub.GetPreferredAllocation(
            pb.PreferredAllocationRequest(
                container_requests=[
                    pb.ContainerPreferredAllocationRequest(
                        available_deviceIDs=list(available),
                        must_include_deviceIDs=list(must_include),
                        allocation_size=size,
                    )
                ]
            ),
            timeout=timeout,
        )
        return list(resp.container_responses[0].deviceIDs)

    def pre_start_container(self, ids: Iterable[str]) -> pb.PreStartContainerResponse:
        return self.stub.PreStartContainer(
            pb.PreStartContainerRequest(devices_ids=list(ids)), timeout=PRE_START_CONTAINER_TIMEOUT_S
        )

    def close(self) -> None:
        self.closed = True
        if self._stream is not None:
            self._stream.cancel()
        self.channel.close()
        if self._thread is not None:
            self._thread.join(5)


@dataclass
class _State:
    registrations: list[Registration] = field(default_factory=list)
    plugins: dict[str, PluginClient] = field(default_factory=dict)


class FakeKubelet(pb_grpc.RegistrationServicer):
    """Serves Registration on ``<socket_dir>/kubelet.sock`` and follows registered plugins.

    ``refuse`` (optional) is consulted on each Register: return an error text to refuse it.
    """

    def __init__(
        self,
        socket_dir: str,
        *,
        max_receive_bytes: int = KUBELET_MAX_RECEIVE_BYTES,
        refuse: Callable[[pb.RegisterRequest], str | None] | None = None,
    ) -> None:
        self.socket_dir = os.path.abspath(socket_dir)
        self.socket_path = os.path.join(self.socket_dir, "kubelet.sock")
        self.max_receive_bytes = max_receive_bytes
        self.refuse = refuse
        self.starts = 0
        self._cond = threading.Condition()
        self._state = _State()
        self._server: grpc.Server | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeKubelet:
        os.makedirs(self.socket_dir, exist_ok=True)
        self._executor = futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="fake-kubelet")
        server = grpc.server(self._executor)
        pb_grpc.add_RegistrationServicer_to_server(self, server)
        if server.add_insecure_port(f"unix:{self.socket_path}") == 0:
            raise OSError(f"fake kubelet cannot listen on {self.socket_path}")
        server.start()
        self._server = server
        self.starts += 1
        log.info("fake kubelet: serving Registration on %s", self.socket_path)
        return self

    def stop(self) -> None:
        """Stop serving, drop every plugin connection, remove kubelet.sock."""
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None
            self._executor.shutdown(wait=False)
        with self._cond:
            plugins = list(self._state.plugins.values())
            self._state.plugins.clear()
        for p in plugins:
            p.close()
        try:
            os.unlink(self.socket_path)
        except FileNotFoundError:
            pass

    def clean_directory(self) -> list[str]:
        """What a starting kubelet does: delete every non-directory entry but the checkpoint."""
        removed = []
        for name in os.listdir(self.socket_dir):
            path = os.path.join(self.socket_dir, name)
            if name == KUBELET_CHECKPOINT or stat.S_ISDIR(os.lstat(path).st_mode):
                continue
            os.unlink(path)
            removed.append(name)
        return removed

    def restart(self) -> None:
        """A kubelet restart: stop, clean the directory, serve a new kubelet.sock."""
        self.stop()
        self.clean_directory()
        self.start()

    def __enter__(self) -> FakeKubelet:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- Registration service ----------------------------------------------------------

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        error = ""
        if request.version not in SUPPORTED_VERSIONS:
            error = f"Requested version {request.version!r} is not supported"
        elif not is_extended_resource_name(request.resource_name):
            error = f"invalid extended resource name {request.resource_name!r}"
        elif self.refuse is not None:
            error = self.refuse(request) or ""
        reg = Registration(
            request.version,
            request.endpoint,
            request.resource_name,
            request.options.pre_start_required,
            request.options.get_preferred_allocation_available,
            time.monotonic(),
            accepted=not error,
            error=error,
        )
        with self._cond:
            self._state.registrations.append(reg)
            self._cond.notify_all()
        if error:
            log.info("fake kubelet: refused %s: %s", request.resource_name, error)
            context.abort(grpc.StatusCode.UNKNOWN, error)
        # Like the kubelet: answer first, connect to the plugin in the background.
        threading.Thread(target=self._connect, args=(reg,), name="fake-kubelet-connect", daemon=True).start()
        return pb.Empty()

    def _connect(self, reg: Registration) -> None:
        client = PluginClient(self.socket_dir, reg, self.max_receive_bytes)
        try:
            client.connect()
        except grpc.RpcError as exc:
            client.stream_error = f"connect failed: {exc}"
            log.warning("fake kubelet: cannot connect to %s: %s", client.socket_path, exc)
        with self._cond:
            old = self._state.plugins.get(reg.resource_name)
            self._state.plugins[reg.resource_name] = client
            self._cond.notify_all()
        if old is not None:
            old.close()

    # -- observing ---------------------------------------------------------------------

    @property
    def registrations(self) -> list[Registration]:
        with self._cond:
            return list(self._state.registrations)

    def plugin(self, resource_name: str) -> PluginClient | None:
        with self._cond:
            return self._state.plugins.get(resource_name)

    def wait_for_plugins(
        self, resource_names: Iterable[str], timeout: float, since: float = float("-inf")
    ) -> dict[str, PluginClient]:
        """Wait until each resource registered (after ``since``) and its first list arrived."""
        names = list(resource_names)
        deadline = time.monotonic() + timeout

        def ready() -> dict[str, PluginClient] | None:
            out = {}
            for n in names:
                c = self._state.plugins.get(n)
                if c is None or c.registration.at < since or c.updates == 0:
                    return None
                out[n] = c
            return out

        with self._cond:
            while (found := ready()) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    have = {n: (c.registration.at >= since, c.updates) for n, c in self._state.plugins.items()}
                    raise TimeoutError(f"plugins {names} not registered and listing within {timeout} s; have {have}")
                self._cond.wait(min(left, 0.05))
            return found
