"""The demo's tables made to fit a terminal: wrapping at separators, footnotes for long notes."""

from __future__ import annotations

from vgpu.sim.demo.render import fit_table, visible_len, wrap_cell


def test_wrap_cell_breaks_after_separators_and_cuts_long_tokens():
    assert wrap_cell("multi-container/inference", 16) == ["multi-container/", "inference"]
    assert wrap_cell("a b c", 10) == ["a b c"]
    assert wrap_cell("GPU-3027c995aea7", 6) == ["GPU-", "3027c9", "95aea7"]
    assert all(visible_len(x) <= 7 for x in wrap_cell("0/2 nodes are unavailable: 2 not enough gpu", 7))


def test_fit_table_keeps_a_table_that_fits():
    lines = fit_table(["A", "B"], [["x", "y"]], width=80)
    assert lines == ["  A  B", "  x  y"]


def test_fit_table_moves_long_notes_below_and_wraps_preferred_columns():
    note = "0/2 nodes are unavailable: 2 not enough gpu fitted on this node."
    rows = [["vgpu-job-worker-0", "GPU-3027… 4096MiB/5%, GPU-ef2e… 4096MiB/5%", ""], ["oversized", "—", note]]
    lines = fit_table(["POD", "DEVICES", "NOTE"], rows, width=40, wrap=(1,), notes=(2,))
    assert all(visible_len(x) <= 40 for x in lines), lines
    text = "\n".join(lines)
    assert "[1]" in lines[2] or any(ln.rstrip().endswith("[1]") for ln in lines)
    assert " ".join(text.split()).count(note) == 1  # the full note, once, below the table
    assert "vgpu-job-worker-0" in text  # the preferred wrap column gave way, not the pod name
