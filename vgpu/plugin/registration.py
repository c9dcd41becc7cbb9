"""Registering our servers with the kubelet, and keeping them registered.

docs/kubelet-api.md §5.  ``PluginSet`` owns the three servers of one
configuration.  Its ``run`` loop is the single place that (re)starts them:

- serve first, prove it by dialling our own socket, then call ``Register``;
- any failure (kubelet socket absent, dial timeout, refused Register) stops all three
  and retries the whole set with exponential backoff (0.5 s doubling to 30 s, reset on
  success) — never a busy loop;
- a re-created ``kubelet.sock`` (new inode) or one of our sockets disappearing (a new
  kubelet deletes every file in the directory) restarts and re-registers all three; a
  newly appeared kubelet socket is tried at once, whatever the backoff;
- ``replace()`` swaps in new managers (SIGHUP reload) and restarts the same way.

The directory is polled every ``poll_interval`` (0.25 s, docs/kubelet-api.md §5) —
a few ``stat`` calls, cheap enough that inotify is not worth a dependency.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import grpc

from vgpu.plugin.api import VERSION, pb, pb_grpc
from vgpu.plugin.devices import ResourceKind
from vgpu.plugin.resources import ResourceManager
from vgpu.plugin.responses import Allocator
from vgpu.plugin.server import DevicePluginServer

log = logging.getLogger(__name__)

DIAL_TIMEOUT_S = 5.0


class RegistrationError(Exception):
    """The kubelet could not be reached or refused a registration."""


def wait_serving(socket_path: str, timeout: float = DIAL_TIMEOUT_S) -> None:
    """Prove our server answers before telling the kubelet: one real RPC on our socket.

    A real call with ``wait_for_ready`` both dials (blocking up to ``timeout``) and checks
    the service; grpc's ``channel_ready_future`` notices readiness only on a 0.2 s poll
    when used off the main thread, which would cost ~1 s per re-registration.
    """
    with grpc.insecure_channel(f"unix:{socket_path}") as channel:
        try:
            pb_grpc.DevicePluginStub(channel).GetDevicePluginOptions(pb.Empty(), timeout=timeout, wait_for_ready=True)
        except grpc.RpcError as exc:
            raise RegistrationError(
                f"our server on {socket_path} does not answer: {exc.code().name}: {exc.details()}"
            ) from exc


def register(kubelet_socket: str, manager: ResourceManager, timeout: float = DIAL_TIMEOUT_S) -> None:
    """One ``Register`` call (dial blocks up to ``timeout``); the endpoint is our socket's file name."""
    if not os.path.exists(kubelet_socket):
        raise RegistrationError(f"kubelet socket {kubelet_socket} does not exist")
    with grpc.insecure_channel(f"unix:{kubelet_socket}") as channel:
        try:
            pb_grpc.RegistrationStub(channel).Register(
                pb.RegisterRequest(
                    version=VERSION,
                    endpoint=manager.socket_name,
                    resource_name=manager.resource_name,
                    options=manager.options(),
                ),
                timeout=timeout,
                wait_for_ready=True,
            )
        except grpc.RpcError as exc:
            raise RegistrationError(
                f"kubelet at {kubelet_socket} did not accept {manager.resource_name}: "
                f"{exc.code().name}: {exc.details()}"
            ) from exc
    log.info(
        "%s: registered with the kubelet at %s (endpoint %s)",
        manager.resource_name,
        kubelet_socket,
        manager.socket_name,
    )


@dataclass
class Backoff:
    """Registration retry delays: 0.5 s doubling up to 30 s; reset after success."""

    first: float = 0.5
    cap: float = 30.0
    _next: float = 0.0

    def __post_init__(self) -> None:
        self._next = self.first

    def next(self) -> float:
        delay, self._next = self._next, min(self._next * 2, self.cap)
        return delay

    def reset(self) -> None:
        self._next = self.first

    @property
    def upcoming(self) -> float:
        """The delay the next failure will wait."""
        return self._next


def _identity(path: str) -> tuple[int, int, int] | None:
    """(device, inode, ctime ns) of a file; ctime tells a re-created file even if the inode is reused."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_ctime_ns


class PluginSet:
    """The three servers, kept registered with the kubelet by ``run``."""

    def __init__(
        self,
        kubelet_socket: str,
        managers: Sequence[ResourceManager],
        allocators: Mapping[ResourceKind, Allocator],
        *,
        poll_interval: float = 0.25,
        backoff: Backoff | None = None,
    ) -> None:
        self.kubelet_socket = kubelet_socket
        self.socket_dir = os.path.dirname(os.path.abspath(kubelet_socket))
        self.allocators = dict(allocators)
        self.poll_interval = poll_interval
        self.backoff = backoff or Backoff()
        self._lock = threading.Lock()  # guards _managers / _pending
        self._serve_lock = threading.Lock()  # held while the server set changes (run turn, replace)
        self._managers = list(managers)
        self._pending: list[ResourceManager] | None = None
        self.servers: list[DevicePluginServer] = []
        self.registered = False
        self.registrations = 0  # completed registrations of the whole set (logs, tests)
        self.registered_resources: frozenset[str] = frozenset()  # accepted by the kubelet (metrics)
        self.kubelet_restarts = 0  # re-registrations forced by the kubelet side (metrics)
        self._registered_kubelet: tuple[int, int, int] | None = None
        self._attempted_kubelet: tuple[int, int, int] | None = None

    @property
    def managers(self) -> list[ResourceManager]:
        with self._lock:
            return list(self._managers)

    def replace(self, managers: Sequence[ResourceManager]) -> None:
        """Use new managers (config reload).

        When the registered resources stay the same (names, sockets, options), the running servers
        switch to the new managers and their streams push the new lists: the kubelet sees a list
        update, never a disconnect.  Otherwise the set is restarted and re-registered on the next
        loop turn.
        """
        managers = list(managers)
        with self._serve_lock:
            if self.registered and self._same_registration(managers):
                for server, m in zip(self.servers, managers, strict=True):
                    server.retarget(m)
                with self._lock:
                    self._managers, self._pending = managers, None
                log.info("configuration reloaded: device lists updated in place")
                return
            with self._lock:
                self._pending = managers

    def _same_registration(self, managers: Sequence[ResourceManager]) -> bool:
        def key(m: ResourceManager) -> tuple:
            return m.resource_name, m.socket_name, m.options().SerializeToString()

        return len(managers) == len(self.servers) and [key(m) for m in managers] == [
            key(s.manager) for s in self.servers
        ]

    # -- one attempt -------------------------------------------------------------------

    def _stop_servers(self) -> None:
        for s in self.servers:
            try:
                s.stop()
            except Exception:  # noqa: BLE001 - stopping must go on for the others
                log.exception("%s: stopping the server failed", s.name)
        self.servers = []
        self.registered_resources = frozenset()

    def _start_and_register(self) -> None:
        self._stop_servers()
        with self._lock:
            managers = list(self._managers)
        for m in managers:
            server = DevicePluginServer(m, self.allocators[m.kind], self.socket_dir)
            self.servers.append(server)
            try:
                server.start()
            except (OSError, RuntimeError) as exc:
                raise RegistrationError(f"{m.resource_name}: cannot serve on {server.socket_path}: {exc}") from exc
            wait_serving(server.socket_path)
        for m in managers:
            register(self.kubelet_socket, m)
            self.registered_resources |= {m.resource_name}

    def _needs_restart(self) -> str | None:
        """Why the registered set must be restarted, or None while all is well."""
        kubelet = _identity(self.kubelet_socket)
        if kubelet is None:
            return f"kubelet socket {self.kubelet_socket} is gone"
        if kubelet != self._registered_kubelet:
            return f"kubelet socket {self.kubelet_socket} was re-created"
        for s in self.servers:
            if not s.socket_present():
                return f"our socket {s.socket_path} disappeared"
        return None

    # -- the loop ----------------------------------------------------------------------

    def _turn(self, next_attempt: float) -> float:
        """One loop turn (under the serve lock): apply a pending reload, notice a lost kubelet or
        socket, and (re)register when due.  Returns the time of the next attempt."""
        with self._lock:
            if self._pending is not None:
                self._managers, self._pending = self._pending, None
                if self.registered:
                    log.info("configuration reloaded: restarting the device plugins")
                self.registered = False
                next_attempt = 0.0
        if self.registered:
            why = self._needs_restart()
            if why is not None:
                log.warning("%s: restarting and re-registering the device plugins", why)
                self.kubelet_restarts += 1
                self.registered = False
                next_attempt = 0.0
        if not self.registered:
            kubelet = _identity(self.kubelet_socket)
            new_kubelet = kubelet is not None and kubelet != self._attempted_kubelet
            if time.monotonic() >= next_attempt or new_kubelet:
                self._attempted_kubelet = kubelet
                try:
                    self._start_and_register()
                except Exception as exc:  # noqa: BLE001 - any failure is retried, never fatal
                    self._stop_servers()
                    delay = self.backoff.next()
                    next_attempt = time.monotonic() + delay
                    log.error(
                        "registration failed: %s; retrying in %.1f s",
                        exc,
                        delay,
                        exc_info=not isinstance(exc, RegistrationError),
                    )
                else:
                    self.registered = True
                    self.registrations += 1
                    self._registered_kubelet = kubelet
                    self.backoff.reset()
        return next_attempt

    def run(self, stop: threading.Event) -> None:
        """Keep the set registered until ``stop`` is set; then stop servers, remove sockets."""
        next_attempt = 0.0
        try:
            while not stop.is_set():
                with self._serve_lock:
                    next_attempt = self._turn(next_attempt)
                stop.wait(self.poll_interval)
        finally:
            with self._serve_lock:
                self._stop_servers()
                self.registered = False
