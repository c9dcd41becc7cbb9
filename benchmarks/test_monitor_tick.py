"""The monitor's 5-second tick (GC, scan, priority feedback) at 100 / 1,000 / 4,096 container directories.

In process: the real :class:`~vgpu.monitor.core.Monitor` over writer-made v1.2 regions (4
processes x 2 GPUs each), pods from a static lookup, no inotify (every tick re-lists the
directories: the worst case; with inotify a quiet tick lists nothing).  After a first scan has
opened every region, each tick is timed; the three sizes take turns.  Gate
``monitor.tick_4096`` (max, ms) keeps a node packed with containers inside its 5 s interval with
room to spare; the rows go into the scaling table of docs/performance.md.
"""

from __future__ import annotations

import statistics
import time

from benchmarks.conftest import QUICK, limit_gate
from benchmarks.test_monitor import PROCS, UTIL
from vgpu.monitor.core import Monitor
from vgpu.sim.hamicore.scenario import UUIDS, add_container
from vgpu.sim.pods import StaticPods, new_uid, pod

SIZES = (100, 1000, 4096)


def test_tick_at_100_1000_4096_directories(benchmark, tmp_path):
    monitors = {}
    try:
        for size in SIZES:
            hook = tmp_path / f"hook{size}"
            hook.mkdir()
            pods = []
            for i in range(size):
                uid = new_uid()
                add_container(hook, uid, "main", procs=PROCS, sm_util=UTIL)
                pods.append(pod(uid, f"pod-{i}", namespace="default", gpus={"main": UUIDS}))
            m = Monitor(str(hook), StaticPods(pods), None, "node-1", use_inotify=False)
            assert m.scan().tracked == size
            monitors[size] = m
        times: dict[int, list[float]] = {s: [] for s in SIZES}
        for _ in range(3 if QUICK else 10):
            for size, m in monitors.items():
                t0 = time.perf_counter()
                result = m.tick()
                times[size].append(time.perf_counter() - t0)
                assert result.scan.ok and result.scan.tracked == size
        med = {s: statistics.median(v) for s, v in times.items()}
        benchmark.pedantic(monitors[100].tick, rounds=3, iterations=1)
    finally:
        for m in monitors.values():
            m.close()
    print("\nmonitor tick by directories: " + ", ".join(f"{s}: {med[s] * 1e3:.1f} ms" for s in SIZES))
    benchmark.extra_info["scaling"] = {
        "title": "Monitor tick (GC + scan + feedback, no inotify), in process",
        "columns": ["Container directories", "Tick median", "Per directory"],
        "rows": [[f"{s:,}", f"{med[s] * 1e3:.1f} ms", f"{med[s] / s * 1e6:.1f} µs"] for s in SIZES],
    }
    limit_gate("monitor.tick_4096", med[4096] * 1e3, directories=4096)
