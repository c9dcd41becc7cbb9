"""Checks and exit status of `vgpu demo` (pure: built from a hand-made DemoState)."""

from __future__ import annotations

import io
import pathlib

from vgpu.protocol import keys
from vgpu.sim.demo.options import build_options
from vgpu.sim.demo.pods import EXPECT_SUCCESS, EXPECT_UNSCHEDULABLE, RUNNING, SKIPPED, UNSCHEDULABLE, Example, PodRecord
from vgpu.sim.demo.render import Printer
from vgpu.sim.demo.report import (
    EXIT_CHECKS,
    EXIT_COMPONENT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    DemoState,
    XidRecord,
    board_lines,
    checks,
    exit_code,
    summary_lines,
)


def _pod(name: str, expect: str = EXPECT_SUCCESS, mode: str | None = None, plain: bool = False) -> PodRecord:
    ctrs = [{"name": "c", "resources": {"limits": {"volcano.sh/vgpu-number": 1}}}]
    if plain:
        ctrs.append({"name": "side"})
    meta = {"name": name, "annotations": {keys.VGPU_MODE: mode} if mode else {}}
    return PodRecord(
        Example(pathlib.Path(f"{name}.yaml"), {"kind": "Pod", "metadata": meta, "spec": {"containers": ctrs}}, expect)
    )


def _state(**kw) -> DemoState:
    s = DemoState(build_options(mode="mig", **kw))
    s.nodes = [{"name": "gpu-node-1", "registered": True}]
    mig = _pod("m", mode="mig")
    mig.state, mig.bind_phase = RUNNING, keys.BIND_PHASE_SUCCESS
    over = _pod("o", EXPECT_UNSCHEDULABLE)
    over.state = UNSCHEDULABLE
    skipped = _pod("h", mode="hami-core")
    skipped.state, skipped.skipped = SKIPPED, "asks for vgpu-mode hami-core; no node has that mode in this run"
    s.pods = [mig, over, skipped]
    s.mig = {"pod": "default/m", "mig_uuids": ["MIG-1"]}
    s.xid = XidRecord("gpu-node-1", 0, "GPU-1", 79, 1.0, unhealthy_at=2.0)
    return s


def test_all_good_in_a_mig_only_run_needs_no_hami_core_checks():
    s = _state()
    results = checks(s)
    assert {c.name: c.ok for c in results} == {
        "registration": True,
        "pods": True,
        "mig": True,
        "xid": True,
        "components": True,
    }
    assert exit_code(s, results) == EXIT_OK


def test_exit_status_rules():
    s = _state()
    s.pods[1].state = RUNNING  # the oversized pod ran: a check fails
    assert exit_code(s, checks(s)) == EXIT_CHECKS
    assert "default/o: Running (expected unschedulable)" in next(c.detail for c in checks(s) if c.name == "pods")
    s = _state(duration=5)
    s.interrupted = True
    assert exit_code(s, checks(s)) == EXIT_INTERRUPTED
    s = _state()
    s.interrupted = True
    assert exit_code(s, checks(s)) == EXIT_OK  # Ctrl-C is the normal end without --duration
    s.problems.append("vgpu plugin (gpu-node-1) exited unexpectedly with status 1:\nlog")
    results = checks(s)
    assert exit_code(s, results) == EXIT_COMPONENT
    assert (
        next(c for c in results if c.name == "components").detail
        == "vgpu plugin (gpu-node-1) exited unexpectedly with status 1:"
    )


def test_xid_and_mig_failures_are_named():
    s = _state()
    s.xid = XidRecord("gpu-node-1", 0, "GPU-1", 79, 1.0)
    s.mig = None
    by = {c.name: c for c in checks(s)}
    assert not by["xid"].ok and "never turned unhealthy" in by["xid"].detail
    assert not by["mig"].ok and by["mig"].detail == "no MIG allocation happened"


def test_hami_core_run_requires_metrics_feedback_and_multi_container():
    s = DemoState(build_options(gpus="A100-80GB:1"))
    s.nodes = [{"name": "gpu-node-1", "registered": True}]
    p = _pod("p", plain=True)
    p.state, p.bind_phase = RUNNING, keys.BIND_PHASE_SUCCESS
    s.pods = [p]
    by = {c.name: c for c in checks(s)}
    assert not by["metrics"].ok and not by["feedback"].ok and not by["multi-container"].ok


def test_board_and_summary_render_without_colour():
    s = _state()
    printer = Printer(io.StringIO())
    text = "\n".join(board_lines(s, printer) + summary_lines(s, checks(s), printer))
    assert any(line.split()[:1] == ["o"] for line in text.splitlines())  # pod default/o, namespace not repeated
    assert "Unschedulable" in text and "PASS  mig" in text and "\x1b" not in text
