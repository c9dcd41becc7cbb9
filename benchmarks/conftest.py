"""Benchmark helpers: quick mode for CI and same-run ratio gates.

Every hot path is measured next to a baseline in the same run; the gate compares
the two medians, so the verdict does not depend on how fast the machine is.

Thresholds come from ``benchmarks/gates.toml`` by gate id (``ratio_gate(..., "region.native_vs_python")``,
``limit_gate("memory.plugin.growth", mb)``).  Every evaluation is recorded and written into the
pytest-benchmark JSON under ``"gates"`` (``make bench`` renders it as build/bench/summary.md).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest

from benchmarks.gates import Gate, GateResult, load_gates

QUICK = os.environ.get("VGPU_BENCH_QUICK") == "1"
GATES_FILE_NAME = "benchmarks/gates.toml"
GATES: dict[str, Gate] = load_gates()
RESULTS: list[GateResult] = []  # every gate evaluated in this session, in order


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


def interleaved_medians(fast: Callable[[], Any], slow: Callable[[], Any], n: int) -> tuple[float, float]:
    """Medians of ``fast`` and ``slow`` timed alternately, call by call (after one warm-up call each)."""
    fast()
    slow()
    fs, ss = [], []
    clock = time.perf_counter
    for _ in range(n):
        t0 = clock()
        fast()
        t1 = clock()
        slow()
        t2 = clock()
        fs.append(t1 - t0)
        ss.append(t2 - t1)
    return statistics.median(fs), statistics.median(ss)


def _current_test() -> str:
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


def record_gate(
    gate: str,
    value: float,
    *,
    ours_median_s: float | None = None,
    baseline_median_s: float | None = None,
    **detail: Any,
) -> GateResult:
    """Evaluate declared gate ``gate`` on ``value`` (a ratio, or a value in the gate's unit) and record it.

    Does not assert: a test with several gates records them all, then asserts (see :func:`assert_gates`).
    """
    g = GATES.get(gate)
    if g is None:
        raise KeyError(f"gate {gate!r} is not declared in {GATES_FILE_NAME}")
    result = GateResult(
        g.id,
        g.kind,
        g.measures,
        g.threshold,
        g.unit,
        float(value),
        g.passes(float(value)),
        ours_median_s,
        baseline_median_s,
        _current_test(),
        QUICK,
        True,
        dict(detail),
    )
    RESULTS.append(result)
    return result


def assert_gates(*results: GateResult) -> None:
    """Fail the test if any of ``results`` failed, naming every failing gate."""
    bad = [
        f"{r.id}: {_value_text(r)} does not meet {GATES[r.id].threshold_text if r.id in GATES else r.threshold}"
        for r in results
        if not r.passed
    ]
    assert not bad, "; ".join(bad)


def _value_text(r: GateResult) -> str:
    return f"{r.value:.2f}x" if r.kind == "ratio" else f"{r.value:.2f} {r.unit}"


def ratio_gate(
    benchmark,
    fast: Callable[[], Any],
    slow: Callable[[], Any],
    gate: str | None = None,
    *,
    n: int,
    minimum: float | None = None,
    what: str | None = None,
    interleave: bool = False,
) -> float:
    """Benchmark ``fast`` with pytest-benchmark, time ``slow`` in the same run, gate the ratio.

    ``gate`` names a ratio gate of gates.toml (its ``min`` is the threshold).  The older form
    ``minimum=..., what=...`` still works for benchmarks not migrated yet; such a result is
    recorded as undeclared, which ``make bench`` reports as a failure until it is declared.
    Returns ``median(slow) / median(fast)``; fails when it is below the threshold.

    ``interleave=True`` gates on ``fast`` and ``slow`` timed alternately, call by call (the
    pytest-benchmark stats stay those of the block of ``fast`` rounds): for paths whose cost
    drifts with shared state both sides touch (the fake NVML rewriting and reloading its MIG
    state), where two separate blocks would each catch a different phase of the drift.  Not
    the default: a baseline that leaves much garbage (e.g. 287,536 protobuf objects) would
    then bill its collection to the fast side.
    """
    if (gate is None) == (minimum is None):
        raise TypeError("ratio_gate: pass exactly one of a gate id (gates.toml) or minimum= (legacy)")
    if gate is not None:
        g = GATES.get(gate)
        if g is None or g.kind != "ratio":
            raise KeyError(f"ratio gate {gate!r} is not declared in {GATES_FILE_NAME}")
        minimum, what = g.threshold, what or g.id
    benchmark.pedantic(fast, rounds=n, iterations=1, warmup_rounds=2)
    if interleave:
        fast_median, slow_median = interleaved_medians(fast, slow, n)
    else:
        fast_median, slow_median = benchmark.stats.stats.median, median_time(slow, n)
    ratio = slow_median / fast_median
    if gate is not None:
        result = record_gate(
            gate, ratio, ours_median_s=fast_median, baseline_median_s=slow_median, rounds=n, interleaved=interleave
        )
    else:
        result = GateResult(
            f"undeclared:{benchmark.name}",
            "ratio",
            what or benchmark.name,
            minimum,
            "x",
            ratio,
            ratio >= minimum,
            fast_median,
            slow_median,
            _current_test(),
            QUICK,
            False,
            {"rounds": n},
        )
        RESULTS.append(result)
    benchmark.extra_info.update(
        {
            "gate_id": result.id,
            "baseline_median_s": slow_median,
            "ratio": ratio,
            "gate": minimum,
        }
    )
    print(
        f"\n{what}: {fast_median * 1e6:.1f} us vs baseline {slow_median * 1e6:.1f} us "
        f"-> {ratio:.1f}x (gate >= {minimum}x)"
    )
    assert ratio >= minimum, f"{what}: {ratio:.2f}x is below the required {minimum}x"
    return ratio


def limit_gate(gate: str, value: float, **detail: Any) -> GateResult:
    """Record a ``max`` gate (value in the gate's unit) and fail the test if it is exceeded."""
    result = record_gate(gate, value, **detail)
    assert_gates(result)
    return result


def pytest_benchmark_update_json(config, benchmarks, output_json) -> None:
    """Put every gate result of the session into the pytest-benchmark JSON."""
    output_json["gates"] = [r.as_dict() for r in RESULTS]
    output_json["vgpu_bench"] = {"quick": QUICK, "gates_file": GATES_FILE_NAME}


@pytest.fixture(scope="session")
def quick() -> bool:
    return QUICK
