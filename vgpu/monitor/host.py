"""Host GPU values for the scrape, from NVML through a worker thread with a bounded wait.

NVML is initialised once at startup (no per-scrape ``nvmlInit``, §4.1).  A scrape asks the
worker for a fresh sample and waits at most ``bound_s`` for it; if NVML is slow or hung, the
scrape serves the last good values instead and their age is exported
(``vgpu_monitor_nvml_sample_age_seconds``).  While a call is stuck longer than the bound, later
scrapes do not wait at all.

A per-device, per-call NVML error (e.g. ``NOT_SUPPORTED`` utilisation on a MIG-enabled GPU,
HAMi#1089) only omits that device's series for that family and is counted; it never fails the
scrape (the sampler keeps a return code per device and family).
"""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from vgpu.nvml.device import GpuInfo
from vgpu.nvml.errors import NVML_SUCCESS, code_name
from vgpu.nvml.sampler import NodeSample
from vgpu.protocol.register import register_type

log = logging.getLogger(__name__)

DEFAULT_BOUND_S = 1.0


class SampleSource(Protocol):
    def sample(self) -> NodeSample: ...


@dataclass(frozen=True, slots=True)
class HostGpu:
    """Identity of one host GPU (host NVML index order), fixed at startup."""

    index: int
    uuid: str
    name: str

    @property
    def device_type(self) -> str:
        """``NVIDIA-<nvmlDeviceGetName>``, the register annotation's Type (§3)."""
        return register_type(self.name)

    @classmethod
    def of(cls, info: GpuInfo) -> HostGpu:
        return cls(info.index, info.uuid, info.name)


class HostSource:
    """The last good NVML sample and a worker that refreshes it on demand."""

    def __init__(self, sampler: SampleSource, gpus: Sequence[HostGpu], *, bound_s: float = DEFAULT_BOUND_S,
                 monotonic: Callable[[], float] = time.monotonic):
        self.sampler = sampler
        self.gpus = tuple(gpus)
        self.bound_s = bound_s
        self._monotonic = monotonic
        self._cond = threading.Condition()
        self._wanted = False
        self._busy_since: float | None = None
        self._done = 0
        self._last: NodeSample | None = None
        self._stop = False
        self.errors: Counter[tuple[str, str, str]] = Counter()  # (device index, call, code name) -> count
        self.stale_serves = 0  # scrapes that got older values because NVML did not answer in time
        self._thread = threading.Thread(target=self._run, name="monitor-nvml", daemon=True)

    def start(self) -> HostSource:
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)  # a hung NVML call keeps it alive; it is a daemon thread
        close = getattr(self.sampler, "close", None)
        if close is not None and not self._thread.is_alive():
            close()

    def _run(self) -> None:
        failures = 0
        while True:
            with self._cond:
                while not self._wanted and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                self._wanted = False
                self._busy_since = self._monotonic()
            sample: NodeSample | None = None
            try:
                sample = self.sampler.sample()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - NVML trouble must never stop the monitor
                failures += 1
                if failures == 1 or failures % 100 == 0:
                    log.warning("NVML sampling failed (%d in a row): %s", failures, exc)
            with self._cond:
                self._busy_since = None
                if sample is not None:
                    self._last = sample
                    for d in sample.devices:
                        if d.memory_rc != NVML_SUCCESS:
                            self.errors[(str(d.index), "memory", code_name(d.memory_rc))] += 1
                        if d.utilization_rc != NVML_SUCCESS:
                            self.errors[(str(d.index), "utilization", code_name(d.utilization_rc))] += 1
                else:
                    self.errors[("", "sample", "exception")] += 1
                self._done += 1
                self._cond.notify_all()

    def latest(self) -> NodeSample | None:
        """A sample taken after this call started, or — after at most ``bound_s`` — the last good one."""
        now = self._monotonic()
        with self._cond:
            if self._busy_since is not None and now - self._busy_since > self.bound_s:
                self.stale_serves += 1
                return self._last  # stuck in NVML: do not wait again
            target = self._done + 1
            if self._busy_since is None:
                self._wanted = True
                self._cond.notify_all()
            deadline = now + self.bound_s
            while self._done < target:
                left = deadline - self._monotonic()
                if left <= 0:
                    self.stale_serves += 1
                    break
                self._cond.wait(left)
            return self._last

    def status(self) -> tuple[list[tuple[tuple[str, str, str], int]], NodeSample | None, int]:
        """(error counts, last good sample, stale serves) for the self-metrics."""
        with self._cond:
            return sorted(self.errors.items()), self._last, self.stale_serves

    def age(self, sample: NodeSample | None) -> float | None:
        return None if sample is None else max(0.0, self._monotonic() - sample.monotonic)
