"""`make bench-readme BENCH_MERGE=1`: rows of a partial full run replace theirs; the rest stay."""

from __future__ import annotations

import pytest

from benchmarks import summary

HEAD = (
    "| Gate | Measures | Ours (median) | Baseline (median) | Measured | Threshold | Result |\n"
    "|---|---|---:|---:|---:|---:|---|\n"
)


def block(mode: str, rows: dict[str, str], tables: str = "") -> str:
    body = "".join(f"| `{g}` | m | 1 µs | 2 µs | {v} | ≥ 1× | pass |\n" for g, v in rows.items())
    return f"{mode} Machine: M. Run at T.\n\n{HEAD}{body}\nN gate results.\n{tables}"


def test_new_rows_replace_old_ones_and_the_header_names_both_runs():
    old = block("Mode: full.", {"a": "1.0×", "b": "2.0×"}, "\n#### Scaling: t1\n\n| x |\n|---|\n| old |\n")
    new = block("Mode: full.", {"b": "3.0×"}, "\n#### Scaling: t1\n\n| x |\n|---|\n| new |\n")
    out = summary.merge_summaries(old, new, ["a", "b"])
    assert out.startswith("Mode: full, two runs. 1 rows: ")
    assert "| `a` | m | 1 µs | 2 µs | 1.0× |" in out and "| `b` | m | 1 µs | 2 µs | 3.0× |" in out
    assert "| new |" in out and "| old |" not in out
    assert "2 gate results: 2 passed, 0 failed." in out


def test_a_gate_no_run_measured_or_a_quick_run_is_refused():
    old = block("Mode: full.", {"a": "1.0×"})
    with pytest.raises(ValueError, match="no run measured: b"):
        summary.merge_summaries(old, block("Mode: full.", {}), ["a", "b"])
    with pytest.raises(ValueError, match="quick"):
        summary.merge_summaries(old, summary.QUICK_MARK + "\n" + block("Mode: quick.", {"a": "1×"}), ["a"])
