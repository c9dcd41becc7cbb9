"""Allocate/delete cycles with the real plugin and the real monitor running: RSS and fds stay flat.

Short variant (50 cycles) in ``make test``; 1,000 cycles under ``make soak`` (marker ``soak``).
Growth is measured after a warm-up of 10 cycles (imports, caches and gRPC channels settle), with
psutil on both processes: RSS growth ≤ 5 MB, open fds ≤ +10 (issue 11).
"""

from __future__ import annotations

import pathlib

import psutil
import pytest

from vgpu.sim.processes import MonitorProcess

from .invariants import assert_own_allocation, delete_pod, schedule_and_admit
from .results import Stopwatch, record

WARMUP = 10
RSS_GROWTH_MAX = 5 * 1024 * 1024
FD_GROWTH_MAX = 10


def _usage(pids: dict[str, int]) -> dict[str, tuple[int, int]]:
    return {n: (psutil.Process(p).memory_info().rss, psutil.Process(p).num_fds()) for n, p in pids.items()}


def _soak(cluster, tmp_path: pathlib.Path, cycles: int, key: str, order: int) -> None:
    mon = MonitorProcess(
        tmp_path, cluster.hook_path, cluster.api.kubeconfig(tmp_path / "kc-mon"), nvml_env=cluster.nvml.env
    ).start()
    try:
        pids = {"plugin": cluster.plugin.proc.pid, "monitor": mon.pid}
        base: dict[str, tuple[int, int]] = {}
        sw = Stopwatch()
        for i in range(WARMUP + cycles):
            if i == WARMUP:
                base = _usage(pids)
                sw.restart()
            name = f"s{i}"
            res = schedule_and_admit(cluster, name, gpus=1 + i % 2, memory=1000 + i % 7)
            assert_own_allocation(cluster, name, res)
            if i % 5 == 0:
                mon.scrape()
            delete_pod(cluster, name)
        per_cycle = sw.elapsed / cycles
        end = _usage(pids)
        assert mon.proc.poll() is None and cluster.plugin.proc.poll() is None
    finally:
        mon.terminate()
    growth = {n: (end[n][0] - base[n][0], end[n][1] - base[n][1]) for n in pids}
    text = "; ".join(f"{n}: RSS {g[0] / 1048576:+.2f} MB, fds {g[1]:+d}" for n, g in growth.items())
    record(
        key,
        f"{cycles} pod allocate/delete cycles, plugin + monitor running",
        f"every pod got its own devices; {text} (after {WARMUP} warm-up cycles; {per_cycle * 1000:.0f} ms/cycle)",
        None,
        None,
        order,
    )
    for n, (rss, fds) in growth.items():
        assert rss <= RSS_GROWTH_MAX, f"{n} RSS grew {rss / 1048576:.2f} MB over {cycles} cycles"
        assert fds <= FD_GROWTH_MAX, f"{n} open fds grew by {fds} over {cycles} cycles"


def test_soak_short_50_cycles(cluster, tmp_path):
    _soak(cluster, tmp_path, 50, "soak-50", 70)


@pytest.mark.soak
def test_soak_1000_cycles(cluster, tmp_path):
    _soak(cluster, tmp_path, 1000, "soak-1000", 71)
