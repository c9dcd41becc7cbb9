"""The monitor's own counters and gauges (exported as ``vgpu_monitor_*``).

Plain numbers behind one lock: the loop thread and HTTP threads update them, the self-metrics
collector reads them at scrape time.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

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

    def observe_scrape(self, seconds: float) -> None:
        with self.lock:
            self.scrapes += 1
            self.scrape_seconds_sum += seconds
            self.last_scrape_seconds = seconds
            for i, bound in enumerate(SCRAPE_BUCKETS):
                if seconds <= bound:
                    self.scrape_bucket_counts[i] += 1
