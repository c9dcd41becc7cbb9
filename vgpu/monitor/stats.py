"""The monitor's own counters and gauges (exported as ``vgpu_monitor_*``).

Plain numbers behind one lock: the loop thread and HTTP threads update them, the self-metrics
collector reads them at scrape time.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.registry import Collector

from vgpu.monitor.exposition import RenderedFamily, label_text
from vgpu.monitor.trust import MISMATCH_REASONS

# Scrape-duration histogram buckets, seconds.
SCRAPE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass
class MonitorStats:
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    scrapes: int = 0
    scrape_seconds_sum: float = 0.0
    scrape_bucket_counts: list[int] = field(default_factory=lambda: [0] * len(SCRAPE_BUCKETS))
    last_scrape_seconds: float = 0.0
    files_tracked: int = 0
    files_initialising: int = 0
    directories: int = 0
    rejected_now: dict[str, int] = field(default_factory=dict)
    rejected_total: Counter[str] = field(default_factory=Counter)
    read_errors: Counter[str] = field(default_factory=Counter)
    unmapped_containers: int = 0
    terminal_containers: int = 0
    scans: int = 0
    scan_failures: int = 0
    last_scan_seconds: float = 0.0
    last_tick_monotonic: float = 0.0
    feedback_writes: Counter[str] = field(default_factory=Counter)
    feedback_errors: int = 0
    # every reason present from the start, at 0
    region_mismatches: Counter[str] = field(default_factory=lambda: Counter(dict.fromkeys(MISMATCH_REASONS, 0)))
    gc_removed: int = 0
    # Work bounds (docs/metrics.md §6, §8): what the caps cut off, what GC deferred, what failed.
    truncated_listings: dict[str, int] = field(default_factory=lambda: {"root": 0, "container_dir": 0})
    gc_deferred: int = 0
    gc_pending: int = 0
    item_errors: Counter[str] = field(default_factory=lambda: Counter({"gc": 0, "scan": 0, "feedback": 0}))
    # The HTTP server's connection bounds (vgpu/httpserve.py).
    http_connections: int = 0
    http_refused: int = 0
    http_dropped: Counter[str] = field(default_factory=lambda: Counter({"timeout": 0, "evicted": 0}))

    def observe_scrape(self, seconds: float) -> None:
        with self.lock:
            self.scrapes += 1
            self.scrape_seconds_sum += seconds
            self.last_scrape_seconds = seconds
            for i, bound in enumerate(SCRAPE_BUCKETS):
                if seconds <= bound:
                    self.scrape_bucket_counts[i] += 1


class BoundsCollector(Collector):
    """``vgpu_monitor_*`` families of the work bounds: caps hit, GC deferred, isolated errors, connections.

    Every label value is present from the start (at zero), so alerts need no ``absent()``.
    """

    def __init__(self, stats: MonitorStats):
        self.stats = stats

    def collect(self) -> Iterator[RenderedFamily]:
        s = self.stats
        with s.lock:
            rows: list[tuple[str, str, str, list[tuple[list[tuple[str, str]], int]]]] = [
                (
                    "vgpu_monitor_truncated_listings",
                    "Directory listings the last scan stopped at their cap, by where (root: 4096, container_dir: 256)",
                    "gauge",
                    [([("where", k)], n) for k, n in sorted(s.truncated_listings.items())],
                ),
                (
                    "vgpu_monitor_gc_deferred_total",
                    "GC passes that ran out of their work budget and left removals for the next tick",
                    "counter",
                    [([], s.gc_deferred)],
                ),
                (
                    "vgpu_monitor_gc_pending",
                    "Stale container directories whose removal is not finished yet",
                    "gauge",
                    [([], s.gc_pending)],
                ),
                (
                    "vgpu_monitor_item_errors_total",
                    "Unexpected errors confined to one directory or one part of a tick, by stage",
                    "counter",
                    [([("stage", k)], n) for k, n in sorted(s.item_errors.items())],
                ),
                ("vgpu_monitor_http_connections", "Open HTTP connections", "gauge", [([], s.http_connections)]),
                (
                    "vgpu_monitor_http_connections_refused_total",
                    "HTTP connections answered 503 and closed because every slot was busy",
                    "counter",
                    [([], s.http_refused)],
                ),
                (
                    "vgpu_monitor_http_connections_dropped_total",
                    "HTTP connections closed by the server before a complete request, by reason",
                    "counter",
                    [([("reason", k)], n) for k, n in sorted(s.http_dropped.items())],
                ),
            ]
        for name, help_, typ, samples in rows:
            f = RenderedFamily(name, help_, typ)
            for labels, value in samples:
                lt = "{" + label_text(labels) + "}" if labels else ""
                f.lines.append(f"{name}{lt} {value}\n")
            yield f
