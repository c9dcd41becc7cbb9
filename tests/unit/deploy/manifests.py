"""Reading the deploy/ manifests for tests: the committed single file, kustomize renders, lookups.

The committed ``deploy/volcano-vgpu-device-plugin.yml`` IS the chart's default render (a test
re-renders it with ``helm template`` and fails when it is stale, tests/unit/deploy/chart.py), so
tests of the base read that file and need no helm.  Overlays are rendered with the real ``kubectl
kustomize`` (build/helm/kubectl from ``make helm``, else the one on PATH); where kubectl is missing
the test skips with the reason, except under CI (``CI`` set), where a missing kubectl is a set-up
failure and the test fails.
"""

from __future__ import annotations

import functools
import pathlib
import subprocess
from collections.abc import Iterable
from typing import Any

import yaml

from tests.support import programs

REPO = pathlib.Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
BASE = DEPLOY / "base"
SINGLE_FILE = DEPLOY / "volcano-vgpu-device-plugin.yml"
OVERLAYS = ("overlays/mig", "overlays/volcano-1.15")
SERVICEMONITOR = "optional/servicemonitor"
ADMISSION = "optional/admission"
SCHEDULER_CONFIGMAP = DEPLOY / "volcano-scheduler-configmap.yaml"
DASHBOARD = DEPLOY / "helm" / "volcano-vgpu" / "files" / "vgpu-dashboard.json"
DOCKERFILE = DEPLOY / "Dockerfile"
NAMESPACE = "kube-system"


def kubectl() -> str:
    """Path of kubectl, or skip (fail under CI) with the reason."""
    return programs.kubectl("rendering the kustomize overlays needs the real `kubectl kustomize`", prefer_built=True)


@functools.cache
def render_text(kustomization: str) -> str:
    """``kubectl kustomize deploy/<kustomization>`` output."""
    proc = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / kustomization)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"kubectl kustomize deploy/{kustomization} failed:\n{proc.stderr}"
    return proc.stdout


def load_docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def render(kustomization: str) -> list[dict[str, Any]]:
    if kustomization == "base":
        return single_file_docs()
    return load_docs(render_text(kustomization))


def single_file_docs() -> list[dict[str, Any]]:
    return load_docs(SINGLE_FILE.read_text())


def find(docs: Iterable[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    hits = [d for d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected exactly one {kind} {name or ''}, found {len(hits)}"
    return hits[0]


def daemonset(docs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return find(docs, "DaemonSet", "volcano-device-plugin")


def container(ds: dict[str, Any], name: str) -> dict[str, Any]:
    hits = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    assert len(hits) == 1, f"DaemonSet has no single container {name!r}"
    return hits[0]


def volume(ds: dict[str, Any], name: str) -> dict[str, Any]:
    hits = [v for v in ds["spec"]["template"]["spec"]["volumes"] if v["name"] == name]
    assert len(hits) == 1, f"DaemonSet has no single volume {name!r}"
    return hits[0]


def mount_for(ds: dict[str, Any], ctr: dict[str, Any], path: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(volumeMount, volume) of the mount that contains ``path`` in container ``ctr`` (longest prefix)."""
    best = None
    for m in ctr.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/") or "/"
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best["mountPath"]):
                best = m
    if best is None:
        return None
    return best, volume(ds, best["name"])


def configmap_data(docs: Iterable[dict[str, Any]], name: str) -> dict[str, str]:
    return dict(find(docs, "ConfigMap", name).get("data") or {})


def plain_env(ctr: dict[str, Any]) -> dict[str, str]:
    """The container's literal env values (fieldRef entries excluded)."""
    return {e["name"]: e["value"] for e in ctr.get("env", []) if "value" in e}


def field_ref_env(ctr: dict[str, Any]) -> dict[str, str]:
    return {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in ctr.get("env", [])
        if "fieldRef" in (e.get("valueFrom") or {})
    }
