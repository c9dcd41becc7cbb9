"""The gRPC DevicePlugin server of one resource, on a unix socket.

A thin layer over ``ResourceManager`` (device list, health, payloads) and an
``Allocator`` (Allocate / GetPreferredAllocation).  Handlers are registered by hand rather
than through the generated servicer so that ListAndWatch can send the manager's
pre-encoded bytes with an identity serializer (see vgpu/plugin/listwatch.py).  No handler
lets an exception escape: errors become gRPC statuses (docs/failures.md A-13).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc

from vgpu.plugin.api import DEVICE_PLUGIN_SERVICE, pb
from vgpu.plugin.resources import ResourceManager
from vgpu.plugin.responses import AllocationError, Allocator

log = logging.getLogger(__name__)

# How often an idle stream re-checks whether it should end even without a wake-up.
_STREAM_POLL_S = 1.0


def _identity(data: bytes) -> bytes:
    return data


def remove_socket(path: str) -> None:
    """Remove a socket (or stale file) at ``path``; never a directory."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass


class DevicePluginServer:
    """Serves one resource on ``<socket_dir>/<socket name>`` until ``stop()``."""

    def __init__(self, manager: ResourceManager, allocator: Allocator, socket_dir: str, max_workers: int = 8) -> None:
        self.manager = manager
        self.allocator = allocator
        self.socket_path = os.path.join(socket_dir, manager.socket_name)
        self._max_workers = max_workers
        self._server: grpc.Server | None = None
        self._executor: futures.ThreadPoolExecutor | None = None
        self._stopping = threading.Event()
        self._socket_ino: int | None = None
        self.streams = 0  # open ListAndWatch streams (for logs and tests)
        self._streams_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.manager.resource_name

    def start(self) -> None:
        """Remove a stale socket, then serve (docs/kubelet-api.md §5 step 7)."""
        remove_socket(self.socket_path)
        self._executor = futures.ThreadPoolExecutor(
            max_workers=self._max_workers, thread_name_prefix=f"dp-{self.manager.kind.value}"
        )
        server = grpc.server(self._executor)
        handlers = {
            "GetDevicePluginOptions": grpc.unary_unary_rpc_method_handler(
                self._options,
                request_deserializer=pb.Empty.FromString,
                response_serializer=pb.DevicePluginOptions.SerializeToString,
            ),
            "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                self._list_and_watch, request_deserializer=pb.Empty.FromString, response_serializer=_identity
            ),
            "GetPreferredAllocation": grpc.unary_unary_rpc_method_handler(
                self._preferred,
                request_deserializer=pb.PreferredAllocationRequest.FromString,
                response_serializer=pb.PreferredAllocationResponse.SerializeToString,
            ),
            "Allocate": grpc.unary_unary_rpc_method_handler(
                self._allocate,
                request_deserializer=pb.AllocateRequest.FromString,
                response_serializer=pb.AllocateResponse.SerializeToString,
            ),
            "PreStartContainer": grpc.unary_unary_rpc_method_handler(
                self._pre_start,
                request_deserializer=pb.PreStartContainerRequest.FromString,
                response_serializer=pb.PreStartContainerResponse.SerializeToString,
            ),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(DEVICE_PLUGIN_SERVICE, handlers),))
        if server.add_insecure_port(f"unix:{self.socket_path}") == 0:
            raise OSError(f"cannot listen on {self.socket_path}")
        server.start()
        self._server = server
        try:
            self._socket_ino = os.stat(self.socket_path).st_ino
        except FileNotFoundError:
            self._socket_ino = None
        log.info("%s: serving on %s", self.name, self.socket_path)

    def retarget(self, manager: ResourceManager) -> None:
        """Serve ``manager`` from now on (a config reload that keeps this resource and socket).

        Open ListAndWatch streams send the new manager's full list at once; no re-registration, so
        the kubelet never sees the resource disconnect (it would mark every device unhealthy and
        refuse pods admitted meanwhile).
        """
        if (manager.resource_name, manager.socket_name) != (self.manager.resource_name, self.manager.socket_name):
            raise ValueError(f"{self.name}: cannot retarget to {manager.resource_name} ({manager.socket_name})")
        old, self.manager = self.manager, manager
        old.wake()

    def socket_present(self) -> bool:
        """False when our socket file was removed or replaced (e.g. by a new kubelet)."""
        try:
            return os.stat(self.socket_path).st_ino == self._socket_ino
        except FileNotFoundError:
            return False

    def stop(self) -> None:
        """End all streams, stop serving and remove our socket (if it is still ours)."""
        self._stopping.set()
        self.manager.wake()
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None
        if self._executor is not None:
            # grpc does not own the pool: without this every kubelet restart leaks its threads.
            self._executor.shutdown(wait=False)
            self._executor = None
        if self.socket_present():
            remove_socket(self.socket_path)
        log.info("%s: stopped serving on %s", self.name, self.socket_path)

    # -- handlers ----------------------------------------------------------------------

    def _options(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.DevicePluginOptions:
        return self.manager.options()

    def _list_and_watch(self, request: pb.Empty, context: grpc.ServicerContext) -> Iterator[bytes]:
        with self._streams_lock:
            self.streams += 1
        context.add_callback(lambda: self.manager.wake())
        try:
            manager = self.manager
            version, payload = manager.snapshot()
            log.info("%s: ListAndWatch opened; sending %d devices", self.name, manager.device_count())
            yield payload
            while not self._stopping.is_set() and context.is_active():
                if self.manager is not manager:  # retargeted by a reload: send the new full list
                    manager = self.manager
                    version, payload = manager.snapshot()
                    log.info("%s: configuration reloaded; sending %d devices", self.name, manager.device_count())
                    yield payload
                    continue
                new_version, payload = manager.wait_for_update(version, _STREAM_POLL_S)
                if new_version != version and not self._stopping.is_set() and self.manager is manager:
                    version = new_version
                    yield payload
        finally:
            with self._streams_lock:
                self.streams -= 1
            log.info("%s: ListAndWatch stream closed", self.name)

    def _guard(self, what: str, context: grpc.ServicerContext, fn, *args):
        try:
            return fn(*args)
        except AllocationError as exc:
            log.warning("%s: %s refused: %s", self.name, what, exc)
            context.abort(exc.code, str(exc))
        except Exception as exc:  # noqa: BLE001 - never let a handler crash the server
            log.exception("%s: %s failed", self.name, what)
            context.abort(grpc.StatusCode.INTERNAL, f"{what} failed: {exc}")

    def _allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        # vgpu-memory requests carry thousands of IDs: log counts at INFO, the IDs at DEBUG.
        log.info(
            "%s: Allocate for %d container(s), %s device IDs",
            self.name,
            len(request.container_requests),
            [len(r.devices_ids) for r in request.container_requests],
        )
        log.debug("%s: Allocate IDs %s", self.name, [list(r.devices_ids) for r in request.container_requests])
        return self._guard("Allocate", context, self.allocator.allocate, self.manager, request)

    def _preferred(
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        return self._guard(
            "GetPreferredAllocation", context, self.allocator.preferred_allocation, self.manager, request
        )

    def _pre_start(
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        return pb.PreStartContainerResponse()
