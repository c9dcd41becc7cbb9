"""Benchmark helpers: quick mode for CI and same-run ratio gates.

Every hot path is measured next to a baseline in the same run; the gate compares
the two medians, so the verdict does not depend on how fast the machine is.
"""
from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest

QUICK = os.environ.get("VGPU_BENCH_QUICK") == "1"


def rounds(full: int) -> int:
    """Rounds to run: a tenth (at least 5) in quick (CI) mode."""
    return max(5, full // 10) if QUICK else full


def median_time(fn: Callable[[], Any], n: int, warmup: int = 2) -> float:
    """Median wall time of ``fn`` over ``n`` calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def ratio_gate(benchmark, fast: Callable[[], Any], slow: Callable[[], Any], *,
               minimum: float, what: str, n: int) -> float:
    """Benchmark ``fast`` with pytest-benchmark, time ``slow`` in the same run, gate the ratio.

    Returns ``median(slow) / median(fast)``; fails when it is below ``minimum``.
    """
    benchmark.pedantic(fast, rounds=n, iterations=1, warmup_rounds=2)
    fast_median = benchmark.stats.stats.median
    slow_median = median_time(slow, n)
    ratio = slow_median / fast_median
    benchmark.extra_info.update({
        "baseline_median_s": slow_median,
        "ratio": ratio,
        "gate": minimum,
    })
    print(f"\n{what}: {fast_median * 1e6:.1f} us vs baseline {slow_median * 1e6:.1f} us "
          f"-> {ratio:.1f}x (gate >= {minimum}x)")
    assert ratio >= minimum, f"{what}: {ratio:.2f}x is below the required {minimum}x"
    return ratio


@pytest.fixture(scope="session")
def quick() -> bool:
    return QUICK
