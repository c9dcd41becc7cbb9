"""The sample pods of `vgpu demo`: the YAML in ``deploy/examples/`` that a user would apply.

Each ``*.yaml`` file holds one Pod.  A line ``# vgpu-demo: expect Unschedulable`` in a file
marks a pod that is meant NOT to be scheduled (the oversized example); every other pod is
expected to reach ``volcano.sh/bind-phase: success``.  A pod whose ``volcano.sh/vgpu-mode`` names a
mode that no simulated node has (e.g. ``mig`` with ``--mode hami-core``) is left out, saying why.

:class:`PodRecord` is the demo's view of one pod through its life: submitted → scheduled (the
scheduler's annotations) → admitted by the kubelet (Allocate env/mounts per container) →
``bind-phase`` from the plugin → running "containers".
"""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from vgpu.protocol import keys
from vgpu.sim.demo.options import DemoConfigError
from vgpu.sim.kubelet.admission import AdmissionResult
from vgpu.sim.nvml.fakenvml import REPO_ROOT

DEFAULT_EXAMPLES = REPO_ROOT / "deploy" / "examples"
EXPECT_SUCCESS = "success"
EXPECT_UNSCHEDULABLE = "unschedulable"
_EXPECT_RE = re.compile(r"^#\s*vgpu-demo:\s*expect\s+(\w+)\s*$", re.MULTILINE | re.IGNORECASE)

# PodRecord.state values, in order of progress.
PENDING, SCHEDULED, ADMITTED, RUNNING = "Pending", "Scheduled", "Admitted", "Running"
FAILED, UNSCHEDULABLE, SKIPPED = "Failed", "Unschedulable", "Skipped"


@dataclass(frozen=True)
class Example:
    path: pathlib.Path
    manifest: dict[str, Any]
    expect: str

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.manifest["metadata"].get("namespace") or "default"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def wants_mode(self) -> str | None:
        """The node mode the pod insists on (``volcano.sh/vgpu-mode``), if any."""
        return (self.manifest["metadata"].get("annotations") or {}).get(keys.VGPU_MODE)

    @property
    def wants_mig(self) -> bool:
        return self.wants_mode == keys.MODE_MIG


def load_example(path: pathlib.Path) -> Example:
    text = path.read_text()
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise DemoConfigError(f"{path}: not valid YAML: {exc}") from None
    if len(docs) != 1 or not isinstance(docs[0], dict) or docs[0].get("kind") != "Pod":
        raise DemoConfigError(f"{path}: must hold exactly one Pod")
    doc = docs[0]
    if not isinstance(doc.get("metadata"), dict) or not doc["metadata"].get("name"):
        raise DemoConfigError(f"{path}: metadata.name is required")
    m = _EXPECT_RE.search(text)
    expect = EXPECT_SUCCESS
    if m:
        word = m.group(1).lower()
        if word not in (EXPECT_SUCCESS, EXPECT_UNSCHEDULABLE):
            raise DemoConfigError(f"{path}: '# vgpu-demo: expect {m.group(1)}' must be Success or Unschedulable")
        expect = word
    return Example(path, doc, expect)


def load_examples(directory: pathlib.Path | None) -> list[Example]:
    d = directory or DEFAULT_EXAMPLES
    if not d.is_dir():
        raise DemoConfigError(f"examples directory {d} not found (pass --examples DIR with the sample pod YAMLs)")
    files = sorted(d.glob("*.yaml"))
    if not files:
        raise DemoConfigError(f"examples directory {d} has no *.yaml files")
    examples = [load_example(p) for p in files]
    keys_seen = [e.key for e in examples]
    dup = next((k for k in keys_seen if keys_seen.count(k) > 1), None)
    if dup:
        raise DemoConfigError(f"examples directory {d}: pod {dup} is defined twice")
    return examples


def container_env(manifest: dict[str, Any], container: str) -> dict[str, str]:
    """The container's own literal ``env`` (valueFrom entries are not resolvable here)."""
    for c in (manifest.get("spec") or {}).get("containers") or []:
        if c.get("name") == container:
            return {e["name"]: str(e["value"]) for e in c.get("env") or [] if "value" in e}
    return {}


@dataclass
class PodRecord:
    example: Example
    state: str = PENDING
    uid: str = ""
    node: str = ""
    reason: str = ""
    scheduled_annotations: dict[str, str] = field(default_factory=dict)
    admission: AdmissionResult | None = None
    bind_phase: str = ""
    final_annotations: dict[str, str] = field(default_factory=dict)
    containers: list[Any] = field(default_factory=list)  # demo.workload containers
    times: dict[str, float] = field(default_factory=dict)
    skipped: str = ""

    @property
    def key(self) -> str:
        return self.example.key

    @property
    def settled(self) -> bool:
        """Nothing more will happen to it in the scripted flow."""
        return self.state in (RUNNING, FAILED, UNSCHEDULABLE, SKIPPED)

    @property
    def as_expected(self) -> bool:
        if self.state == SKIPPED:
            return True
        if self.example.expect == EXPECT_UNSCHEDULABLE:
            return self.state == UNSCHEDULABLE
        return self.state == RUNNING and self.bind_phase == keys.BIND_PHASE_SUCCESS

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": self.key,
            "file": str(self.example.path),
            "expect": self.example.expect,
            "state": self.state,
            "as_expected": self.as_expected,
            "uid": self.uid,
            "node": self.node,
            "bind_phase": self.bind_phase,
            "reason": self.reason,
            "scheduler_annotations": self.scheduled_annotations,
            "final_annotations": self.final_annotations,
            "times": self.times,
        }
        if self.skipped:
            out["skipped"] = self.skipped
        if self.admission is not None:
            out["admission_error"] = self.admission.error
            out["allocate"] = [
                {
                    "container": c.name,
                    "devices": {r: len(ids) for r, ids in c.devices.items()},
                    "device_ids": c.devices,
                    "envs": dict(sorted(c.envs.items())),
                    "mounts": [
                        {"container_path": m.container_path, "host_path": m.host_path, "read_only": m.read_only}
                        for m in c.mounts
                    ],
                    "cdi_devices": list(c.cdi_devices),
                    "annotations": dict(sorted(c.annotations.items())),
                }
                for c in self.admission.containers
            ]
        out["containers"] = [c.snapshot() for c in self.containers]
        return out
