"""The gates file, the summary table and the docs/performance.md block (benchmarks/gates.py, benchmarks/summary.py)."""

from __future__ import annotations

import json
import pathlib

import pytest

from benchmarks import summary
from benchmarks.gates import GATES_FILE, GateFileError, GateResult, load_gates


def _write(tmp_path, text: str) -> pathlib.Path:
    p = tmp_path / "gates.toml"
    p.write_text(text)
    return p


GOOD = """
[[gate]]
id = "a.ratio"
kind = "ratio"
min = 5
measures = "fast vs slow"
source = "issue 1"

[[gate]]
id = "b.mem"
kind = "max"
max = 120
unit = "MB"
measures = "resident memory"
"""


def test_the_project_gates_file_is_valid_and_covers_the_issue_targets():
    gates = load_gates()
    assert gates["nvml.sample_into"].threshold == 5 and gates["region.native_vs_python"].threshold == 1.5
    assert gates["memory.plugin.rss_startup"].threshold == 120 and gates["memory.plugin.growth"].threshold == 5
    assert all(g.measures and g.source for g in gates.values())
    assert GATES_FILE.parent.name == "benchmarks"


def test_good_file_parses_and_gates_evaluate_both_ways(tmp_path):
    gates = load_gates(_write(tmp_path, GOOD))
    ratio, mem = gates["a.ratio"], gates["b.mem"]
    assert (ratio.kind, ratio.threshold, ratio.unit) == ("ratio", 5.0, "x")
    assert ratio.passes(5.0) and ratio.passes(7) and not ratio.passes(4.99) and not ratio.passes(float("nan"))
    assert mem.passes(120) and not mem.passes(120.01)
    assert (ratio.threshold_text, mem.threshold_text) == ("≥ 5×", "≤ 120 MB")


@pytest.mark.parametrize(
    "text, words",
    [
        ("[[gate]]\nkind = 'ratio'\nmin = 1\nmeasures = 'x'\n", "'id'"),
        (GOOD + "\n[[gate]]\nid = 'a.ratio'\nkind = 'ratio'\nmin = 1\nmeasures = 'x'\n", "duplicate id"),
        ("[[gate]]\nid = 'x'\nkind = 'fastest'\nmin = 1\nmeasures = 'x'\n", "'kind'"),
        ("[[gate]]\nid = 'x'\nkind = 'ratio'\nmin = 0\nmeasures = 'x'\n", "positive number 'min'"),
        ("[[gate]]\nid = 'x'\nkind = 'ratio'\nmin = true\nmeasures = 'x'\n", "positive number 'min'"),
        ("[[gate]]\nid = 'x'\nkind = 'ratio'\nmax = 3\nmeasures = 'x'\n", "positive number 'min'"),
        ("[[gate]]\nid = 'x'\nkind = 'max'\nmax = 3\nmeasures = 'x'\n", "'unit'"),
        ("[[gate]]\nid = 'x'\nkind = 'ratio'\nmin = 3\n", "'measures'"),
        ("[[gate]]\nid = 'x'\nkind = 'ratio'\nmin = 3\nmeasures = 'x'\nminimum = 4\n", "unknown key"),
        ("[thresholds]\nx = 1\n", "unknown top-level"),
        ("", "no [[gate]]"),
        ("[[gate]\n", "gates.toml"),
    ],
)
def test_malformed_file_is_a_clear_error(tmp_path, text, words):
    path = _write(tmp_path, text)
    with pytest.raises(GateFileError) as info:
        load_gates(path)
    assert str(path) in str(info.value) and words in str(info.value)


def _result(gid: str, value: float, passed: bool, **kw) -> dict:
    kind = kw.pop("kind", "ratio")
    base = GateResult(
        gid,
        kind,
        f"measures {gid}",
        kw.pop("threshold", 5.0),
        kw.pop("unit", "x"),
        value,
        passed,
        kw.pop("ours", 1e-3),
        kw.pop("base", 9e-3),
        f"benchmarks/test_x.py::test_{gid}",
        False,
        kw.pop("declared", True),
    )
    return base.as_dict()


def test_summary_lists_every_result_in_file_order_and_fails_on_a_failed_gate(tmp_path):
    gates = load_gates(_write(tmp_path, GOOD))
    data = {
        "gates": [
            _result("b.mem", 130.0, False, kind="max", threshold=120.0, unit="MB", ours=None, base=None),
            _result("a.ratio", 9.0, True),
        ],
        "vgpu_bench": {"quick": False},
        "machine_info": {"cpu": {"brand_raw": "Test CPU", "count": 2}},
        "datetime": "T",
    }
    s = summary.render(data, gates)
    rows = [line for line in s.markdown.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == ["a.ratio", "b.mem"]
    assert "| 1.00 ms | 9.00 ms | 9.00× | ≥ 5× | pass |" in rows[0]
    assert "| — | — | 130.0 MB | ≤ 120 MB | **FAIL** |" in rows[1]
    assert not s.ok and "b.mem failed" in s.problems[0]
    assert "Test CPU, 2 logical CPUs" in s.markdown and summary.QUICK_MARK not in s.markdown


def test_require_all_flags_missing_and_undeclared_gates(tmp_path):
    gates = load_gates(_write(tmp_path, GOOD))
    data = {
        "gates": [_result("a.ratio", 9.0, True), _result("undeclared:test_y", 9.0, True, declared=False)],
        "vgpu_bench": {"quick": True},
    }
    assert summary.render(data, gates).ok
    s = summary.render(data, gates, require_all=True)
    assert len(s.problems) == 2
    assert any("b.mem is declared" in p and "did not run" in p for p in s.problems)
    assert any("undeclared:test_y" in p and "declare it" in p for p in s.problems)
    assert s.markdown.startswith(summary.QUICK_MARK) and "not run: b.mem" in s.markdown


def test_page_block_is_replaced_between_markers_only():
    page = f"# T\n\n## Results\n\nintro\n\n{summary.BEGIN}\nold table\n{summary.END}\n\nafter\n"
    out = summary.rewrite_page(page, "| new |\n")
    assert out == f"# T\n\n## Results\n\nintro\n\n{summary.BEGIN}\n| new |\n{summary.END}\n\nafter\n"
    assert summary.rewrite_page(out, "| new |\n") == out  # idempotent
    with pytest.raises(ValueError, match="quick run"):
        summary.rewrite_page(page, summary.QUICK_MARK + "\n| t |\n")
    with pytest.raises(ValueError, match="markers"):
        summary.rewrite_page("# no markers\n", "| t |\n")


def test_summary_cli_and_page_cli(tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"gates": [_result("nvml.sample_into", 2.0, False)]}))
    assert summary.main([str(results), "--out", str(tmp_path / "s.md")]) == 1
    assert "**FAIL**" in (tmp_path / "s.md").read_text()
    page = tmp_path / "performance.md"
    page.write_text(f"{summary.BEGIN}\n{summary.END}\n")
    (tmp_path / "full.md").write_text("| full |\n")
    assert summary.main(["--page", str(page), str(tmp_path / "full.md")]) == 0
    assert "| full |" in page.read_text()
    assert summary.main(["--page", str(page), str(tmp_path / "missing.md")]) == 1
    assert "missing.md" in capsys.readouterr().err
