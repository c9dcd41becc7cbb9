"""docs/reliability.md: its table is the generated block that ``make reliability-readme`` rewrites."""

from __future__ import annotations

import json

from tests.reliability import readme


def test_the_page_has_one_generated_block():
    text = readme.PAGE.read_text()
    assert text.count(readme.BEGIN) == 1 and text.count(readme.END) == 1
    block = text.split(readme.BEGIN, 1)[1].split(readme.END, 1)[0]
    assert "| Fault | Behaviour | Measured recovery | Bound asserted |" in block


def test_rewrite_replaces_only_the_block(tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps(
            {
                "updated": "2026-01-01T00:00:00Z",
                "rows": {
                    "b": {"fault": "second", "behaviour": "b | c", "recovery_s": None, "bound_s": None, "order": 2},
                    "a": {"fault": "first", "behaviour": "ok", "recovery_s": 0.25, "bound_s": 2, "order": 1},
                },
            }
        )
    )
    page = tmp_path / "reliability.md"
    page.write_text(f"# R\n\nintro\n\n{readme.BEGIN}\nold\n{readme.END}\n\nafter\n")
    assert readme.main([str(page), str(results)]) == 0
    text = page.read_text()
    assert text.startswith("# R\n\nintro\n\n") and text.endswith(f"{readme.END}\n\nafter\n") and "old" not in text
    rows = [line for line in text.splitlines() if line.startswith("| first") or line.startswith("| second")]
    assert rows == ["| first | ok | 0.25 s | ≤ 2 s |", "| second | b \\| c | — | — |"]
    assert readme.main([str(page), str(tmp_path / "missing.json")]) == 1
    assert "missing.json" in capsys.readouterr().err
