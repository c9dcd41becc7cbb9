"""`vgpu demo` as a person reads it: at 80 columns, with the legend, the kubectl/inspect hint,
the explanations of the pods that did not run, and --keep-logs."""

from __future__ import annotations

import pathlib
import re

from vgpu.sim.demo.pods import DEFAULT_EXAMPLES

EVENT_LINE = re.compile(r"^\[\s*\d+\.\ds\] ")
DETAIL_INDENT = " " * 19


def test_demo_at_80_columns_explains_itself_and_keeps_its_logs(demo):
    run = demo(["--duration", "15", "--no-color", "--keep-logs"], env={"COLUMNS": "80"})
    assert run.wait(240) == 0, run.output()
    lines = "".join(run.stdout).splitlines()
    # every line that is not the event log (timestamped lines and their details) fits 80 columns
    too_wide = [ln for ln in lines if len(ln) > 80 and not EVENT_LINE.match(ln) and not ln.startswith(DETAIL_INDENT)]
    assert not too_wide, "\n".join(too_wide)
    text = "\n".join(lines)
    # the tables keep every column (nothing clipped to "…" at the right edge)
    for header in ("HEALTH", "CTRS", "MEM USED", "SM", "DEVICES", "NOTE", "PRIO", "FEEDBACK"):
        assert header in text, header
    # each non-obvious field explained once
    for term in ("volcano.sh/vgpu-time=18446744073709551615:", "type=NVIDIA-NVIDIA A100-…:", "rk / sw:"):
        assert text.count(term) == 1, term
    # how to reach the cluster
    kubeconfig = re.search(r"export KUBECONFIG=(\S+)", text)
    assert kubeconfig and "kubectl get nodes,pods -o wide" in text and "vgpu inspect pod default/oversized" in text
    # the Pending pod: the message Volcano writes, as 05-oversized.yaml quotes it
    quoted = re.search(
        r"^#   (0/2 nodes are unavailable: .*)$", (DEFAULT_EXAMPLES / "05-oversized.yaml").read_text(), re.M
    )
    assert quoted is not None
    assert f"Event FailedScheduling, condition PodScheduled=False: {quoted.group(1)}" in " ".join(text.split())
    # the pod the plugin refuses, and how `vgpu inspect pod` explains both
    flat = " ".join(text.split())
    assert "default/refused-init-gpu: the kubelet rejected the pod: UnexpectedAdmissionError" in flat
    assert "vgpu inspect pod default/oversized (its explanation part)" in flat
    assert f"Condition PodScheduled=False (Unschedulable): {quoted.group(1)}" in flat
    assert "gpu-node-1: does not fit: container cuda: 0 of 1 GPU(s) have room" in flat
    assert "vgpu inspect pod default/refused-init-gpu (its explanation part)" in flat
    assert (
        "Warning VGPUAllocationFailed from vgpu-device-plugin: init containers requesting vGPU are not supported"
        in flat
    )
    assert "PASS pods every sample pod as expected" in flat
    # --keep-logs: the daemons' logs outlive the temp dir, and the demo says where
    kept = re.search(r"daemons' logs kept in (\S+):", text)
    assert kept, text[-2000:]
    logs = sorted(pathlib.Path(kept.group(1)).rglob("*.log"))
    try:
        assert {p.name for p in logs} == {"plugin.log", "monitor.log"} and len(logs) == 4
        assert all(str(p) in text for p in logs)
        assert (
            "vgpu plugin starting on node gpu-node-1"
            in (pathlib.Path(kept.group(1)) / "gpu-node-1" / "plugin.log").read_text()
        )
        assert not pathlib.Path(kubeconfig.group(1)).exists()  # the temp dir itself is gone
    finally:
        for p in logs:
            p.unlink()
        for d in sorted({p.parent for p in logs}, reverse=True):
            d.rmdir()
        pathlib.Path(kept.group(1)).rmdir()
