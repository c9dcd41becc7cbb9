"""The monitor without its process shell: the 5-second loop, the collectors and /metrics rendering.

:class:`Monitor` owns discovery (scan + inotify), GC, the feedback loop and the collector
registry.  It takes its pod source and host-GPU source as arguments, so tests and benchmarks
drive it with the stand-ins' fixed ``StaticPods`` or a real watch, the real fake NVML, and a
fake clock; :mod:`vgpu.monitor.daemon` wires it to the API server, NVML and HTTP.

Every ``interval_s`` (5 s, the feedback period libvgpu's ``recent_kernel`` countdown assumes):
GC of stale directories, a discovery scan, then one feedback pass.  Between ticks, an inotify
event on the containers root or a container directory triggers an extra discovery scan (at most
one per ``EVENT_SCAN_GAP_S``); feedback stays on the fixed period.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import CollectorRegistry

from vgpu.hamicore.paths import HostLayout, parse_container_dir_name
from vgpu.hamicore.region import RegionError
from vgpu.monitor import inotify
from vgpu.monitor.allocation import AllocationCollector, Capacity
from vgpu.monitor.collectors import ContainerCollector, HostCollector, SelfCollector
from vgpu.monitor.discovery import Discovery, GcResult, ScanResult
from vgpu.monitor.exposition import render
from vgpu.monitor.feedback import RECENT_KERNEL, FeedbackInput, FeedbackWrite, plan_feedback
from vgpu.monitor.host import HostSource
from vgpu.monitor.mig_info import MigInfoCollector, MigInfoSource
from vgpu.monitor.pods import PodLookup
from vgpu.monitor.stats import BoundsCollector, MonitorStats
from vgpu.monitor.trust import MismatchLedger, judge

log = logging.getLogger(__name__)
_T = TypeVar("_T")

INTERVAL_S = 5.0
EVENT_SCAN_GAP_S = 0.25  # inotify-triggered scans: at most one per this gap
INITIALISING_RETRY_S = 1.0  # a file without its magic yet: look again this soon ...
INITIALISING_RETRIES = 5  # ... this many times in a row, then only on the period (a creator may have died)
MAX_DIR_WATCHES = 4096
NOISY_EVENTS = 1000  # junk events from one container directory within one period: stop watching it ...
QUIET_S = 60.0  # ... for this long (the periodic scan still covers it)


@dataclass
class TickResult:
    scan: ScanResult
    removed: list[str] = field(default_factory=list)
    writes: list[FeedbackWrite] = field(default_factory=list)


class Monitor:
    """Discovery, GC, feedback and the metrics registry for one ``$HOOK_PATH``."""

    def __init__(
        self,
        hook_path: str,
        pods: PodLookup,
        host: HostSource | None,
        node_name: str,
        *,
        legacy: bool = True,
        hami: bool = True,
        clock: Callable[[], float] = time.time,
        interval_s: float = INTERVAL_S,
        use_inotify: bool = True,
        mig: MigInfoSource | None = None,
        capacity: Capacity | None = None,
    ):
        self.containers_root = HostLayout(hook_path=hook_path).containers_root  # the plugin's root too
        self.pods = pods
        self.host = host
        self.node_name = node_name
        self.clock = clock
        self.interval_s = interval_s
        self.stats = MonitorStats()
        self._inotify = inotify.Inotify.create() if use_inotify else None
        self._root_wd: int | None = None
        self._dir_wds: dict[str, int] = {}
        self._wd_dirs: dict[int, str] = {}
        self._junk_events: dict[int, int] = {}  # wd -> junk events this period
        self._quiet_until: dict[str, float] = {}  # noisy directories not watched until then (monotonic)
        self._watch_limit_logged = False
        self.discovery = Discovery(
            self.containers_root, clock=clock, on_directory=self._watch_dir if self._inotify else None
        )
        self.legacy, self.hami = legacy, hami
        self.registry = CollectorRegistry(auto_describe=False)
        if host is not None:
            self.registry.register(HostCollector(host, node_name, legacy=legacy, hami=hami))
        self.registry.register(
            ContainerCollector(self.discovery, pods, self.stats, legacy=legacy, hami=hami, clock=clock)
        )
        if mig is not None and hami:
            self.registry.register(MigInfoCollector(mig))
        self._allocation = AllocationCollector(
            pods, host.gpus if host else (), node_name, capacity or Capacity(), legacy=legacy, hami=hami
        )
        self.registry.register(self._allocation)
        self._self_collector = SelfCollector(self.stats, pods, host)
        self.registry.register(self._self_collector)
        self.registry.register(BoundsCollector(self.stats))
        # vgpu_monitor_process_*: this daemon's own RSS, CPU seconds, open and max fds, start time
        # (prometheus_client reads them from /proc; named like every other self metric).
        ProcessCollector(namespace="vgpu_monitor", registry=self.registry)
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._thread: threading.Thread | None = None
        self._last_scan = 0.0
        self._init_retries = 0
        self._mismatches = MismatchLedger()

    # ------------------------------------------------------------------ scrape

    def attach_host(self, host: HostSource, mig: MigInfoSource | None = None) -> None:
        """NVML started late (fail-on-init-error=false): the host families join the next scrape."""
        self.host = host
        self.registry.register(HostCollector(host, self.node_name, legacy=self.legacy, hami=self.hami))
        if mig is not None and self.hami:
            self.registry.register(MigInfoCollector(mig))
        self._self_collector.host = host
        self._allocation.set_gpus(host.gpus)

    def render_metrics(self) -> bytes:
        """One scrape: collect every family and render text 0.0.4 (never waits on the API)."""
        t0 = time.perf_counter()
        body = render(self.registry.collect())
        self.stats.observe_scrape(time.perf_counter() - t0)
        return body

    # ------------------------------------------------------------------ tick parts

    def scan(self) -> ScanResult:
        t0 = time.perf_counter()
        result = self.discovery.scan()
        if self._inotify is not None and self._root_wd is None and result.ok:
            self._watch_root()  # after the scan: it creates a missing root
        self._last_scan = time.monotonic()
        s = self.stats
        with s.lock:
            s.scans += 1
            s.last_scan_seconds = time.perf_counter() - t0
            if not result.ok:
                s.scan_failures += 1
            else:
                s.files_tracked = result.tracked
                s.files_initialising = result.initialising
                s.directories = result.directories
                s.rejected_now = dict(result.rejected)
                s.rejected_total.update(result.new_rejections)
                s.truncated_listings = {"root": int(result.truncated), "container_dir": result.truncated_dirs}
            s.item_errors["scan"] += result.item_errors
        return result

    def collect_garbage(self) -> list[str]:
        gc: GcResult = self.discovery.collect_garbage(self.pods)
        with self.stats.lock:
            self.stats.gc_removed += len(gc.removed)
            self.stats.gc_deferred += int(gc.deferred)
            self.stats.gc_pending = gc.pending
            self.stats.item_errors["gc"] += gc.item_errors
        return gc.removed

    def feedback(self) -> list[FeedbackWrite]:
        """One feedback pass over every tracked region (docs/metrics.md §5); returns the writes made.

        Each region is judged by its pod first (docs/metrics.md §5.1): only the GPUs the pod
        assigned it and the pod's priority enter the plan; mismatches are counted and logged."""
        disc = self.discovery
        done: list[FeedbackWrite] = []
        errors = 0
        mismatches: list[str] = []
        get_pod = self.pods.get
        with disc.lock:
            inputs = []
            for t in disc.tracked.values():
                try:
                    snap = t.region.read()
                except RegionError as exc:
                    errors += 1
                    log.debug("feedback: %s", exc)
                    continue
                pod = get_pod(t.pod_uid)
                j = judge(pod, t.container, [d.uuid for d in snap.devices], snap.priority)
                if pod is not None and (j.unassigned or j.claimed_priority is not None):
                    mismatches += self._mismatches.record(t.dir_name, pod, t.container, j)
                inputs.append(
                    FeedbackInput(t, snap.recent_kernel, snap.utilization_switch, j.priority, j.uuids, j.counts)
                )
            self._mismatches.prune(disc.tracked)
            for w in plan_feedback(inputs):
                tr = w.key
                if not tr.writable:
                    continue
                try:
                    if w.field == RECENT_KERNEL:
                        tr.region.write_recent_kernel(tr.layout, w.new)
                    else:
                        tr.region.write_utilization_switch(tr.layout, w.new)
                except RegionError as exc:
                    errors += 1
                    log.warning("feedback write of %s=%d failed: %s", w.field, w.new, exc)
                    continue
                done.append(w)
        with self.stats.lock:
            self.stats.feedback_errors += errors
            for w in done:
                self.stats.feedback_writes[w.field] += 1
            self.stats.region_mismatches.update(mismatches)
        return done

    def tick(self) -> TickResult:
        """GC, then a scan, then one feedback pass; a failing part never keeps the others from running."""
        removed: list[str] = self._isolated("gc", self.collect_garbage, [])
        scan: ScanResult | None = self._isolated("scan", self.scan, None)
        result = TickResult(scan if scan is not None else ScanResult(ok=False, error="the scan failed"), removed)
        result.writes = self._isolated("feedback", self.feedback, [])
        self._junk_events.clear()
        with self.stats.lock:
            self.stats.last_tick_monotonic = time.monotonic()
        return result

    def _isolated(self, stage: str, part: Callable[[], _T], default: _T) -> _T:
        try:
            return part()
        except Exception:  # noqa: BLE001 - e.g. a bug meeting a hostile input: the tick goes on
            log.exception("monitor %s failed; the rest of the tick goes on", stage)
            with self.stats.lock:
                self.stats.item_errors[stage] += 1
            return default

    # ------------------------------------------------------------------ inotify

    def _watch_root(self) -> None:
        assert self._inotify is not None
        try:
            self._root_wd = self._inotify.add_watch(
                self.containers_root, inotify.DIR_EVENTS | inotify.IN_ONLYDIR | inotify.IN_DONT_FOLLOW
            )
        except OSError:
            self._root_wd = None  # missing or a symlink: the scan reports it; retried next scan

    def _watch_dir(self, name: str, dfd: int) -> None:
        """Discovery hook: watch a container directory through the fd it opened (no path lookup)."""
        if name in self._dir_wds or self._inotify is None:
            return
        if len(self._dir_wds) >= MAX_DIR_WATCHES:
            return
        quiet = self._quiet_until.get(name)
        if quiet is not None:
            if time.monotonic() < quiet:
                return
            del self._quiet_until[name]
        try:
            wd = self._inotify.add_watch(f"/proc/self/fd/{dfd}", inotify.DIR_EVENTS | inotify.IN_ONLYDIR)
        except OSError as exc:
            if not self._watch_limit_logged:
                self._watch_limit_logged = True
                log.info(
                    "cannot watch container directories with inotify (%s); the periodic scan still finds everything",
                    exc.strerror,
                )
            return
        old = self._wd_dirs.get(wd)
        if old is not None and old != name:
            self._dir_wds.pop(old, None)
        self._dir_wds[name] = wd
        self._wd_dirs[wd] = name

    def _handle_events(self) -> bool:
        """Drain inotify; True when a scan is warranted."""
        assert self._inotify is not None
        try:
            events = self._inotify.read_events()
        except OSError as exc:
            log.warning("reading inotify events for %s failed: %s; scanning now", self.containers_root, exc)
            return True
        wanted = False
        for ev in events:
            if ev.mask & inotify.IN_IGNORED:
                if ev.wd == self._root_wd:
                    self._root_wd = None
                name = self._wd_dirs.pop(ev.wd, None)
                if name is not None and self._dir_wds.get(name) == ev.wd:
                    del self._dir_wds[name]
                wanted = True
            elif ev.mask & (inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF) and ev.wd == self._root_wd:
                self._inotify.rm_watch(ev.wd)
                self._root_wd = None
                wanted = True
            else:
                wanted = self._relevant(ev) or wanted
                if ev.wd != self._root_wd:  # a storm of any names, *.cache too: the period's scan covers it
                    n = self._junk_events.get(ev.wd, 0) + 1
                    self._junk_events[ev.wd] = n
                    if n == NOISY_EVENTS:
                        self._quiet(ev.wd)
        return wanted

    def _quiet(self, wd: int) -> None:
        """Stop watching a container directory whose tenant churns junk names (its events cost CPU, not scans)."""
        assert self._inotify is not None
        name = self._wd_dirs.get(wd)
        if name is None:
            return
        self._inotify.rm_watch(wd)  # its IN_IGNORED drops the mappings
        if len(self._quiet_until) < MAX_DIR_WATCHES:
            self._quiet_until[name] = time.monotonic() + QUIET_S
        log.info(
            "%s/%s: %d events for other files within one period; not watched for %.0f s (the periodic scan still is)",
            self.containers_root,
            name,
            NOISY_EVENTS,
            QUIET_S,
        )

    def _relevant(self, ev: inotify.Event) -> bool:
        """Whether an event can change what a scan finds; junk names are ignored at the cost of a string test.

        A tenant churning other files in its directory would otherwise buy a scan every 0.25 s.
        """
        if ev.mask & (inotify.IN_Q_OVERFLOW | inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF):
            return True
        if ev.wd == self._root_wd:
            return parse_container_dir_name(ev.name) is not None
        return ev.name.endswith(".cache") and "libvgpu.so" not in ev.name

    # ------------------------------------------------------------------ loop

    def start(self) -> Monitor:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="monitor-loop", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def close(self) -> None:
        self.stop()
        self.discovery.close()
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def healthy(self) -> tuple[bool, str]:
        """Alive and ticking: the last tick is at most three intervals old."""
        if not self.running:
            return False, "monitor loop is not running"
        with self.stats.lock:
            last = self.stats.last_tick_monotonic
        age = time.monotonic() - last
        if last == 0.0 or age > 3 * self.interval_s:
            return False, f"last tick {age:.1f} s ago"
        return True, "ok"

    def _retry_initialising(self, result: ScanResult, next_scan: float | None) -> float | None:
        if not result.initialising:
            self._init_retries = 0
            return next_scan
        self._init_retries += 1
        if self._init_retries > INITIALISING_RETRIES:
            return next_scan
        retry = time.monotonic() + INITIALISING_RETRY_S
        return retry if next_scan is None else min(next_scan, retry)

    def _run(self) -> None:
        with self.stats.lock:
            last = self.stats.last_tick_monotonic
        next_tick = last + self.interval_s if last else time.monotonic()  # a tick before start() counts
        next_scan: float | None = None
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_tick:
                try:
                    next_scan = self._retry_initialising(self.tick().scan, None)  # the tick scanned
                except Exception:  # noqa: BLE001 - the loop must outlive any surprise
                    log.exception("monitor tick failed")
                next_tick += self.interval_s
                if next_tick <= time.monotonic():
                    next_tick = time.monotonic() + self.interval_s
                continue
            if next_scan is not None and now >= next_scan:
                next_scan = None
                try:
                    next_scan = self._retry_initialising(self.scan(), None)
                except Exception:  # noqa: BLE001
                    log.exception("monitor scan failed")
                continue
            deadline = next_tick if next_scan is None else min(next_tick, next_scan)
            fds = [self._wake_r]
            if self._inotify is not None:
                fds.append(self._inotify.fileno())
            try:
                ready, _, _ = select.select(fds, [], [], max(0.0, deadline - now))
            except InterruptedError:
                continue
            if self._wake_r in ready:
                try:
                    os.read(self._wake_r, 64)
                except OSError:
                    pass
            if self._inotify is not None and self._inotify.fileno() in ready and self._handle_events():
                earliest = self._last_scan + EVENT_SCAN_GAP_S
                if next_scan is None or next_scan > earliest:
                    next_scan = max(time.monotonic(), earliest)
