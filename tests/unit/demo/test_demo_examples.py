"""deploy/examples: the sample pods a user applies, and how the demo reads them."""

from __future__ import annotations

import pathlib

import pytest

from vgpu.protocol import keys
from vgpu.sim.demo.options import DemoConfigError
from vgpu.sim.demo.pods import (
    DEFAULT_EXAMPLES,
    EXPECT_REFUSED,
    EXPECT_SUCCESS,
    EXPECT_UNSCHEDULABLE,
    container_env,
    load_examples,
)

VGPU = ("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")


def test_shipped_examples_cover_what_the_demo_must_exercise():
    examples = {e.name: e for e in load_examples(DEFAULT_EXAMPLES)}
    assert set(examples) == {
        "fractional-gpu",
        "multi-container",
        "two-gpus",
        "mig-slice",
        "oversized",
        "vgpu-job-worker-0",
        "vgpu-job-worker-1",
        "memory-only",
        "memory-percentage",
        "check-limit",
        "refused-init-gpu",
    }
    for e in examples.values():
        spec = e.manifest["spec"]
        assert e.manifest["apiVersion"] == "v1" and spec["schedulerName"] == "volcano"
        for c in spec["containers"]:
            limits = (c.get("resources") or {}).get("limits") or {}
            for k in VGPU:
                if k in limits:
                    assert isinstance(limits[k], int) and limits[k] > 0
    assert [e.name for e in examples.values() if e.expect == EXPECT_UNSCHEDULABLE] == ["oversized"]
    assert [e.name for e in examples.values() if e.expect == EXPECT_REFUSED] == ["refused-init-gpu"]
    assert all(e.expect == EXPECT_SUCCESS for n, e in examples.items() if n not in ("oversized", "refused-init-gpu"))
    assert [e.name for e in examples.values() if e.skip] == ["memory-percentage"]  # a test applies it
    # the Volcano Job: its pods as the job controller names them, in the Job's PodGroup
    w0 = examples["vgpu-job-worker-0"].manifest
    assert w0["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "vgpu-job"
    assert w0["metadata"]["labels"]["volcano.sh/job-name"] == "vgpu-job"
    assert w0["spec"]["schedulerName"] == "volcano"
    # every example says what you should see
    for e in examples.values():
        assert "What you should see" in e.path.read_text() or e.name in (
            "fractional-gpu",
            "multi-container",
            "two-gpus",
            "mig-slice",
            "oversized",
        ), e.path
    multi = examples["multi-container"].manifest["spec"]["containers"]
    assert [any(k in (c.get("resources") or {}).get("limits", {}) for k in VGPU) for c in multi] == [True, False]
    assert container_env(examples["multi-container"].manifest, "inference") == {"CUDA_TASK_PRIORITY": "0"}
    assert examples["two-gpus"].manifest["spec"]["containers"][0]["resources"]["limits"][VGPU[0]] == 2
    assert examples["mig-slice"].wants_mig
    assert examples["mig-slice"].manifest["metadata"]["annotations"][keys.VGPU_MODE] == "mig"
    # documented expected failure
    text = examples["oversized"].path.read_text()
    assert "Expected: the pod stays Pending" in text
    assert "#   0/2 nodes are unavailable: 2 not enough gpu fitted on this node." in text


def test_bad_example_files(tmp_path: pathlib.Path):
    with pytest.raises(DemoConfigError, match="not found"):
        load_examples(tmp_path / "nope")
    with pytest.raises(DemoConfigError, match="no \\*.yaml files"):
        load_examples(tmp_path)
    (tmp_path / "a.yaml").write_text("kind: Deployment\n")
    with pytest.raises(DemoConfigError, match="a.yaml: must hold exactly one Pod or one Volcano Job"):
        load_examples(tmp_path)
    (tmp_path / "a.yaml").write_text("# vgpu-demo: expect Maybe\nkind: Pod\nmetadata: {name: p}\n")
    with pytest.raises(DemoConfigError, match="must be Success, Unschedulable or Refused"):
        load_examples(tmp_path)
    (tmp_path / "a.yaml").write_text("kind: Pod\nmetadata: {name: p}\n")
    (tmp_path / "b.yaml").write_text("kind: Pod\nmetadata: {name: p}\n")
    with pytest.raises(DemoConfigError, match="pod default/p is defined twice"):
        load_examples(tmp_path)
