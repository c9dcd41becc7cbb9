"""Host GPU values for the scrape, from NVML through a worker thread with a bounded wait.

NVML is initialised once at startup (no per-scrape ``nvmlInit``, docs/metrics.md §4.1).  A scrape asks the
worker for a fresh value and waits at most ``bound_s`` for it; if NVML is slow or hung, the
scrape serves the last good value instead and its age is exported
(``vgpu_monitor_nvml_sample_age_seconds``).  While a call is stuck longer than the bound, later
scrapes do not wait at all.  :class:`BoundedRefresh` is that mechanism; :class:`HostSource`
(host memory/utilisation) and :class:`vgpu.monitor.mig_info.MigInfoSource` use it.

A per-device, per-call NVML error only omits that device's series for that family and is
counted; it never fails the scrape (the sampler keeps a return code per device and family).
``NOT_SUPPORTED`` is not an error but an answer: the device has no such value (utilisation of a
MIG-enabled GPU, HAMi#1089; memory of a unified-memory part).  It is shown by
``vgpu_monitor_nvml_unsupported`` instead of ``vgpu_monitor_nvml_errors_total``
(docs/metrics.md §4.1), so a MIG node's error counter stays flat.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from vgpu.nvml.device import GpuInfo
from vgpu.nvml.errors import NVML_ERROR_NOT_SUPPORTED, NVML_SUCCESS, code_name
from vgpu.nvml.sampler import NodeSample
from vgpu.protocol.register import register_type

log = logging.getLogger(__name__)

DEFAULT_BOUND_S = 1.0
T = TypeVar("T")
SAMPLED_CALLS = ("memory", "utilization")  # the ``call`` label values of the host NVML self-metrics


class BoundedRefresh(Generic[T]):
    """A value computed on demand in a worker thread; readers wait at most ``bound_s`` for it.

    ``latest()`` returns a value computed after the call started (or by a computation already
    under way, started less than ``bound_s`` ago); otherwise, once the bound has passed, the last
    good value.  ``on_result(value, error)`` runs in the worker after each computation, under no
    lock of ours.
    """

    def __init__(
        self,
        name: str,
        compute: Callable[[], T],
        *,
        bound_s: float = DEFAULT_BOUND_S,
        on_result: Callable[[T | None, BaseException | None], None] | None = None,
    ):
        self.name = name
        self.bound_s = bound_s
        self._compute = compute
        self._on_result = on_result
        self._cond = threading.Condition()
        self._wanted = False
        self._busy_since: float | None = None
        self._done = 0
        self._last: T | None = None
        self._last_at: float | None = None  # monotonic time the last good value was computed
        self._stop = False
        self.stale_serves = 0  # reads that got an older value because the worker did not answer in time
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> BoundedRefresh[T]:
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> bool:
        """Stop the worker; False when it is stuck in a call (it is a daemon thread)."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        failures = 0
        while True:
            with self._cond:
                while not self._wanted and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                self._wanted = False
                self._busy_since = time.monotonic()
            value: T | None = None
            error: BaseException | None = None
            try:
                value = self._compute()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - NVML trouble must never stop the monitor
                error = exc
                failures += 1
                if failures == 1 or failures % 100 == 0:
                    log.warning("%s failed (%d in a row): %s", self.name, failures, exc)
            if self._on_result is not None:
                try:
                    self._on_result(value, error)
                except Exception:  # noqa: BLE001
                    log.exception("%s: result handler failed", self.name)
            with self._cond:
                self._busy_since = None
                if error is None:
                    self._last = value
                    self._last_at = time.monotonic()
                self._done += 1
                self._cond.notify_all()

    def latest(self) -> T | None:
        now = time.monotonic()
        with self._cond:
            if self._busy_since is not None:
                # a computation is under way: wait for it only until it is bound_s old
                deadline = self._busy_since + self.bound_s
            else:
                self._wanted = True
                self._cond.notify_all()
                deadline = now + self.bound_s
            target = self._done + 1
            while self._done < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.stale_serves += 1
                    break
                self._cond.wait(left)
            return self._last

    def age(self) -> float | None:
        """Seconds since the last good value was computed; None before the first one."""
        with self._cond:
            at = self._last_at
        return None if at is None else max(0.0, time.monotonic() - at)


class SampleSource(Protocol):
    def sample(self) -> NodeSample: ...


@dataclass(frozen=True, slots=True)
class HostGpu:
    """Identity of one host GPU (host NVML index order), fixed at startup."""

    index: int
    uuid: str
    name: str
    memory_total_mib: int = 0  # NVML memory.total at startup (the allocation capacity, docs/metrics.md §3.1)

    @property
    def device_type(self) -> str:
        """``NVIDIA-<nvmlDeviceGetName>``, the register annotation's Type (docs/metrics.md §3)."""
        return register_type(self.name)

    @classmethod
    def of(cls, info: GpuInfo) -> HostGpu:
        return cls(info.index, info.uuid, info.name, info.memory_total_mib)


class HostSource:
    """The last good NVML sample of every host GPU, refreshed on demand within ``bound_s``."""

    def __init__(self, sampler: SampleSource, gpus: Sequence[HostGpu], *, bound_s: float = DEFAULT_BOUND_S):
        self.sampler = sampler
        self.gpus = tuple(gpus)
        self._lock = threading.Lock()
        self.errors: Counter[tuple[str, str, str]] = Counter()  # (device index, call, code name) -> count
        # (device index, call) -> 1 while the last sample answered NOT_SUPPORTED; every pair present
        self.unsupported: dict[tuple[str, str], int] = {(str(g.index), c): 0 for g in self.gpus for c in SAMPLED_CALLS}
        self._refresh: BoundedRefresh[NodeSample] = BoundedRefresh(
            "monitor-nvml", sampler.sample, bound_s=bound_s, on_result=self._count
        )

    @property
    def bound_s(self) -> float:
        return self._refresh.bound_s

    def start(self) -> HostSource:
        self._refresh.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        stopped = self._refresh.stop(timeout)
        close = getattr(self.sampler, "close", None)
        if close is not None and stopped:
            close()

    def _count(self, sample: NodeSample | None, error: BaseException | None) -> None:
        with self._lock:
            if sample is None:
                self.errors[("", "sample", "exception")] += 1
                return
            for d in sample.devices:
                index = str(d.index)
                for call, rc in (("memory", d.memory_rc), ("utilization", d.utilization_rc)):
                    if rc == NVML_ERROR_NOT_SUPPORTED:
                        self.unsupported[(index, call)] = 1
                        continue
                    if (index, call) in self.unsupported:
                        self.unsupported[(index, call)] = 0
                    if rc != NVML_SUCCESS:
                        self.errors[(index, call, code_name(rc))] += 1

    def latest(self) -> NodeSample | None:
        """A sample taken after this call started, or — after at most ``bound_s`` — the last good one."""
        return self._refresh.latest()

    def status(self) -> tuple[list[tuple[tuple[str, str, str], int]], float | None, int]:
        """(error counts, age of the last good sample in s, stale serves) for the self-metrics."""
        with self._lock:
            errors = sorted(self.errors.items())
        return errors, self._refresh.age(), self._refresh.stale_serves

    def unsupported_now(self) -> list[tuple[tuple[str, str], int]]:
        """((device index, call), 1/0): whether the last sample answered NOT_SUPPORTED."""
        with self._lock:
            return sorted(self.unsupported.items(), key=lambda kv: (int(kv[0][0]), kv[0][1]))
