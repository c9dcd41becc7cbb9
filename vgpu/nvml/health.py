"""GPU health: the XID policy, the per-GPU health board and the NVML event loop.

See docs/health.md.  Health is tracked per physical GPU and belongs to the plugin
process: kubelet restarts, re-registrations and SIGHUP reloads never reset it.  The
event loop (one thread, nvidia-ml-py) marks GPUs on the board; everyone who cares
(the three kubelet resources, node registration) subscribes to the board and hears
every change at once — the fan-out that upstream v1.11 got wrong (plugin#142).

Three parts:
- ``XidPolicy``: ``DP_DISABLE_HEALTHCHECKS`` / ``DP_ENABLE_HEALTHCHECKS`` with the
  default ignored XIDs (docs/health.md §3, semantics of NVIDIA k8s-device-plugin ≥ v0.18).
- ``GpuHealth``: thread-safe healthy/unhealthy per GPU UUID plus change listeners.
- ``HealthMonitor``: event registration, the wait loop and the optional recovery window
  (docs/health.md §1, §2, §5).
"""

from __future__ import annotations

import heapq
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pynvml

from vgpu.nvml.device import GpuInfo
from vgpu.nvml.library import pynvml_text

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------
# XID policy (docs/health.md §3)

ALL_XIDS = 0  # the key that means "every XID"; the token "0" means ALL too
DEFAULT_IGNORED_XIDS = frozenset({13, 31, 43, 45, 68, 109})
DISABLE_ENV = "DP_DISABLE_HEALTHCHECKS"
ENABLE_ENV = "DP_ENABLE_HEALTHCHECKS"
_UINT64 = re.compile(r"[0-9]+")


def parse_xid_list(value: str | None) -> set[int]:
    """Keys named by one env var: lowercase, split on ``,``, trim, skip empty tokens.

    ``all`` or ``xids`` makes the result exactly {ALL}; malformed tokens are logged and
    skipped (``Ignoring malformed Xid value <v>``), as upstream does.
    """
    keys: set[int] = set()
    for token in (value or "").lower().split(","):
        token = token.strip()
        if not token:
            continue
        if token in ("all", "xids"):
            return {ALL_XIDS}
        if _UINT64.fullmatch(token) and int(token) < 2**64:
            keys.add(int(token))
        else:
            log.warning("Ignoring malformed Xid value %s", token)
    return keys


@dataclass(frozen=True)
class XidPolicy:
    """Which XIDs are ignored.  ``disabled[x]`` True = ignored, False = explicitly fatal."""

    disabled: Mapping[int, bool]

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> XidPolicy:
        disabled = {k: True for k in parse_xid_list(environ.get(DISABLE_ENV))}
        for x in DEFAULT_IGNORED_XIDS:
            disabled[x] = True
        for k in parse_xid_list(environ.get(ENABLE_ENV)):
            disabled[k] = False
        return cls(disabled)

    def all_disabled(self) -> bool:
        """Health checking does not run at all (no event set is created)."""
        return self.disabled.get(ALL_XIDS) is True

    def is_disabled(self, xid: int) -> bool:
        """True when an XID event with this value is ignored."""
        if self.disabled.get(ALL_XIDS) is False:  # ENABLE contained `all`: everything is fatal
            return False
        if xid in self.disabled:
            return self.disabled[xid]
        return self.all_disabled()


# ---------------------------------------------------------------------------------------
# The health board

Listener = Callable[[dict[str, bool]], None]


class GpuHealth:
    """Health per physical GPU UUID; every change is pushed to all listeners at once.

    Listeners are called with ``{uuid: healthy}`` of what changed, outside the lock, in
    the thread that made the change.  Unknown UUIDs count as healthy.
    """

    def __init__(self, uuids: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._healthy: dict[str, bool] = {u: True for u in uuids}
        self._reasons: dict[str, str] = {}
        self._listeners: list[Listener] = []

    def is_healthy(self, uuid: str) -> bool:
        with self._lock:
            return self._healthy.get(uuid, True)

    def reason(self, uuid: str) -> str | None:
        with self._lock:
            return self._reasons.get(uuid)

    def snapshot(self) -> dict[str, bool]:
        with self._lock:
            return dict(self._healthy)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add a listener; returns the function that removes it again."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def set(self, changes: Mapping[str, bool], reason: str) -> dict[str, bool]:
        """Apply ``{uuid: healthy}``; notify listeners of what actually changed."""
        with self._lock:
            changed = {u: h for u, h in changes.items() if self._healthy.get(u, True) != h}
            for u, h in changed.items():
                self._healthy[u] = h
                if h:
                    self._reasons.pop(u, None)
                else:
                    self._reasons[u] = reason
            listeners = list(self._listeners) if changed else []
        for listener in listeners:
            try:
                listener(changed)
            except Exception:  # a broken listener must not stop health handling
                log.exception("health listener %r failed", listener)
        return changed

    def mark_unhealthy(self, uuid: str, reason: str) -> bool:
        return bool(self.set({uuid: False}, reason))

    def mark_healthy(self, uuid: str, reason: str = "recovered") -> bool:
        return bool(self.set({uuid: True}, reason))

    def mark_all_unhealthy(self, uuids: Iterable[str], reason: str) -> dict[str, bool]:
        return self.set({u: False for u in uuids}, reason)


# ---------------------------------------------------------------------------------------
# Recovery window (docs/health.md §5)


def nvml_probe(uuid: str) -> bool:
    """The recovery probe: the GPU answers nvmlDeviceGetHandleByUUID and GetMemoryInfo."""
    try:
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        pynvml.nvmlDeviceGetMemoryInfo(handle)
    except pynvml.NVMLError as exc:
        log.info("GPU %s still failing its recovery probe: %s", uuid, exc)
        return False
    return True


class RecoveryTimers:
    """Per-GPU timers: expiry probes the GPU; success marks it healthy, failure re-arms.

    One thread sleeps until the nearest deadline (no per-GPU threads, no polling).
    """

    def __init__(
        self,
        health: GpuHealth,
        seconds: float,
        probe: Callable[[str], bool] = nvml_probe,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.health = health
        self.seconds = seconds
        self.probe = probe
        self.clock = clock
        self._cond = threading.Condition()
        self._deadline: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="vgpu-health-recovery", daemon=True)
        self._thread.start()

    def arm(self, uuid: str) -> None:
        """(Re)start the N-second timer of ``uuid`` (each fatal event restarts it)."""
        with self._cond:
            due = self.clock() + self.seconds
            self._deadline[uuid] = due
            heapq.heappush(self._heap, (due, uuid))
            self._cond.notify()

    def pending(self) -> set[str]:
        with self._cond:
            return set(self._deadline)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def _next_due(self) -> str | None:
        """Wait until a live timer expires; None when stopped."""
        with self._cond:
            while not self._stopped:
                while self._heap and self._deadline.get(self._heap[0][1]) != self._heap[0][0]:
                    heapq.heappop(self._heap)  # superseded by a re-arm
                if not self._heap:
                    self._cond.wait()
                    continue
                due, uuid = self._heap[0]
                delay = due - self.clock()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                heapq.heappop(self._heap)
                del self._deadline[uuid]
                return uuid
            return None

    def _run(self) -> None:
        while (uuid := self._next_due()) is not None:
            if self.health.is_healthy(uuid):
                continue
            ok = False
            try:
                ok = self.probe(uuid)
            except Exception:
                log.exception("recovery probe of GPU %s failed", uuid)
            if ok:
                log.info("GPU %s recovered", uuid)
                self.health.mark_healthy(uuid, "recovered")
            else:
                self.arm(uuid)


# ---------------------------------------------------------------------------------------
# The NVML event loop (docs/health.md §1–§2)

EVENT_MASK = (
    pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeDoubleBitEccError | pynvml.nvmlEventTypeSingleBitEccError
)
WAIT_TIMEOUT_MS = 5000


class HealthInitError(Exception):
    """The NVML event set cannot be created: exit non-zero rather than run as a zombie
    that advertises healthy GPUs it does not watch (NVIDIA PR #1641, our choice)."""


@dataclass
class HealthMonitor:
    """Watches the given (non-filtered) GPUs for fatal XIDs and marks them on ``health``.

    ``start()`` registers events synchronously (raising ``HealthInitError`` when the event
    set cannot be created) and then runs the wait loop in a daemon thread.  NVML must be
    initialised by the caller (``vgpu.nvml.library.init_nvml``) for the monitor's life.
    """

    gpus: Sequence[GpuInfo]
    health: GpuHealth
    policy: XidPolicy
    recovery_seconds: float = 0
    wait_timeout_ms: int = WAIT_TIMEOUT_MS
    probe: Callable[[str], bool] = nvml_probe
    on_xid: Callable[[str, int], None] | None = None
    """Called with (GPU UUID, XID) for every XID event on one of our GPUs, ignored ones too (metrics)."""
    wait_error: str | None = field(default=None, init=False)
    """The last ``nvmlEventSetWait`` failure while waits keep failing; None once one succeeds."""
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)
    _event_set: Any = field(default=None, init=False)
    _permanent: set[str] = field(default_factory=set, init=False)
    _recovery: RecoveryTimers | None = field(default=None, init=False)
    _mig_mode: set[str] = field(default_factory=set, init=False)
    monitored: set[str] = field(default_factory=set, init=False)

    @property
    def uuids(self) -> list[str]:
        return [g.uuid for g in self.gpus]

    def start(self) -> None:
        if self.policy.all_disabled():
            log.info("health checks disabled (%s=all): no NVML event set is created", DISABLE_ENV)
            return
        if self.recovery_seconds > 0:
            self._recovery = RecoveryTimers(self.health, self.recovery_seconds, self.probe)
        try:
            self._event_set = pynvml.nvmlEventSetCreate()
        except pynvml.NVMLError as exc:
            raise HealthInitError(f"nvmlEventSetCreate failed: {exc}; refusing to run without health checks") from exc
        for gpu in self.gpus:
            self._register(gpu.uuid)
        if self._recovery is not None:
            # A monitor restarted by a reload picks up GPUs that are still unhealthy.
            for uuid in self.uuids:
                if not self.health.is_healthy(uuid) and uuid not in self._permanent:
                    self._recovery.arm(uuid)
        log.info(
            "health checks running for %d GPU(s) (%d with events); ignored XIDs: %s",
            len(self.gpus),
            len(self.monitored),
            sorted(x for x, v in self.policy.disabled.items() if v),
        )
        self._thread = threading.Thread(target=self._loop, name="vgpu-health", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the loop to end; it notices within one wait (≤ wait_timeout_ms)."""
        self._stop.set()
        if self._recovery is not None:
            self._recovery.stop()
        if self._thread is not None:
            self._thread.join(timeout)
            if not self._thread.is_alive() and self._event_set is not None:
                try:
                    pynvml.nvmlEventSetFree(self._event_set)
                except pynvml.NVMLError as exc:
                    log.warning("nvmlEventSetFree failed: %s", exc)
                self._event_set = None

    # -- registration ------------------------------------------------------------------

    def _register(self, uuid: str) -> None:
        """Register one physical GPU exactly once (NVIDIA#2052 registered per replica)."""
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
            supported = pynvml.nvmlDeviceGetSupportedEventTypes(handle)
        except pynvml.NVMLError as exc:
            self._fail_registration(uuid, f"cannot query events: {exc}")
            return
        try:
            pynvml.nvmlDeviceRegisterEvents(handle, EVENT_MASK & supported, self._event_set)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_NOT_SUPPORTED:
                log.warning("Device %s is too old to support healthchecking.", uuid)
                return
            self._fail_registration(uuid, f"nvmlDeviceRegisterEvents failed: {exc}")
            return
        self.monitored.add(uuid)

    def _fail_registration(self, uuid: str, why: str) -> None:
        # Such a GPU never recovers (docs/health.md §5): its events are not watched.
        self._permanent.add(uuid)
        log.error("GPU %s: %s; marking device as unhealthy", uuid, why)
        self.health.mark_unhealthy(uuid, why)

    # -- the loop ----------------------------------------------------------------------

    def _mark(self, uuids: Iterable[str], reason: str) -> None:
        uuids = list(uuids)
        self.health.mark_all_unhealthy(uuids, reason)
        if self._recovery is not None:
            for u in uuids:
                if u not in self._permanent:
                    self._recovery.arm(u)

    def _loop(self) -> None:
        ours = set(self.uuids)
        self._mig_mode = {g.uuid for g in self.gpus if g.mig_mode}
        while not self._stop.is_set():
            try:
                data = pynvml.nvmlEventSetWait_v2(self._event_set, self.wait_timeout_ms)
            except pynvml.NVMLError as exc:
                if exc.value == pynvml.NVML_ERROR_TIMEOUT:
                    self.wait_error = None
                    continue
                if self._stop.is_set():
                    break
                self.wait_error = str(exc)
                log.error("nvmlEventSetWait failed: %s; marking all GPUs unhealthy", exc)
                self._mark(self.uuids, f"event wait failed: {exc}")
                self._stop.wait(1.0)  # our choice: no hot loop on a persistent error
                continue
            self.wait_error = None
            try:
                self._handle(data, ours)
            except Exception:  # noqa: BLE001 - a bad event must not end health checking
                log.exception("handling an NVML event failed")

    def _handle(self, data: Any, ours: set[str]) -> None:
        if data.eventType != pynvml.nvmlEventTypeXidCriticalError:
            log.info(
                "Skipping non-nvmlEventTypeXidCriticalError event: type=0x%x data=%d", data.eventType, data.eventData
            )
            return
        xid = int(data.eventData)
        if self.policy.is_disabled(xid):
            log.info("Skipping event: Xid=%d (ignored by policy)", xid)
            self._count_ignored(data, xid, ours)
            return
        try:
            uuid = pynvml_text(pynvml.nvmlDeviceGetUUID(data.device))
        except pynvml.NVMLError as exc:
            log.error("XidCriticalError: Xid=%d on an unidentifiable device (%s); marking all GPUs unhealthy", xid, exc)
            self._mark(self.uuids, f"Xid {xid} on an unidentifiable device")
            return
        if uuid not in ours:
            log.info("Ignoring event for unexpected device %s (Xid=%d)", uuid, xid)
            return
        where = ""
        if uuid in self._mig_mode and data.gpuInstanceId != 0xFFFFFFFF:
            where = f" (MIG GI {data.gpuInstanceId} CI {data.computeInstanceId}; the whole GPU is marked)"
        log.warning("XidCriticalError: Xid=%d on Device=%s%s; marking device as unhealthy.", xid, uuid, where)
        self._mark([uuid], f"XidCriticalError {xid}")
        if self.on_xid is not None:
            self.on_xid(uuid, xid)

    def _count_ignored(self, data: Any, xid: int, ours: set[str]) -> None:
        """An ignored XID still counts in the metrics, on its GPU when NVML can name it."""
        if self.on_xid is None:
            return
        try:
            uuid = pynvml_text(pynvml.nvmlDeviceGetUUID(data.device))
        except pynvml.NVMLError:
            return
        if uuid in ours:
            self.on_xid(uuid, xid)
