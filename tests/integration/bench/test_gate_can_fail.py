"""The benchmark gate can fail: lose the fast path and ``make bench``'s runner exits non-zero.

``VGPU_BENCH_REGION_READER=python`` makes the region benchmark measure the pure-Python
reference reader behind the Region API (``vgpu.sim.hamicore.python_region``) as "ours" — the very
baseline of the ``region.native_vs_python`` gate — so the measured ratio drops to about 1x
against a threshold of 20x.  The runner (``python -m benchmarks.run``,
what ``make bench`` calls) is started as a real subprocess in quick mode on that one benchmark;
it must exit non-zero and its JSON and summary must show that gate failing.  The same command
without the variable measures a many times higher ratio, so the failure is caused by the slowed
path and nothing else.  (Whether that control run clears 20x on a loaded machine is the job of
``make bench``/``make bench-quick``; asserting it here would only duplicate that check's noise.)
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from benchmarks.gates import load_gates

ROOT = pathlib.Path(__file__).resolve().parents[3]
BENCH = "benchmarks/test_region_reader.py::test_native_reader_vs_pure_python"
GATE = "region.native_vs_python"


def _run(out: pathlib.Path, **env: str) -> tuple[int, str, dict]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("VGPU_BENCH_REGION_READER", "VGPU_BENCH_QUICK")}
    full_env.update(env)
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--out", str(out), "--", BENCH, "-q"],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = json.loads((out / "results.json").read_text())
    return proc.returncode, proc.stdout + proc.stderr, results


def _gate(results: dict) -> dict:
    [gate] = [g for g in results["gates"] if g["id"] == GATE]
    return gate


def test_region_gate_fails_when_the_native_reader_falls_back_to_python(tmp_path):
    threshold = load_gates()[GATE].threshold

    rc, output, results = _run(tmp_path / "slow", VGPU_BENCH_REGION_READER="python")
    gate = _gate(results)
    assert rc != 0, output
    assert not gate["passed"] and gate["value"] < threshold / 4, gate  # ~1x: both sides are the Python reader
    assert f"GATE FAILURE: gate {GATE} failed" in output, output
    summary = (tmp_path / "slow" / "summary.md").read_text()
    assert f"| `{GATE}` |" in summary and "**FAIL**" in summary, summary

    _, output, results = _run(tmp_path / "fast")
    fast = _gate(results)
    assert fast["value"] >= 5 * gate["value"], (fast, gate, output)
