"""Pods without an API server: manifests as the API returns them, and a fixed pod index for the monitor."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

from vgpu.monitor.pods import PodIndex
from vgpu.protocol.pod_model import ResourceNames


def new_uid() -> str:
    return str(uuidlib.uuid4())


def pod(
    uid: str,
    name: str,
    *,
    namespace: str = "default",
    containers: Sequence[str] = ("main",),
    phase: str = "Running",
    node: str = "node-1",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "1"}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": c, "image": "busybox:1.36"} for c in containers]},
        "status": {"phase": phase},
    }


class StaticPods(PodIndex):
    """A fixed, synced set of pods, in place of the node's pod watch (tests and benchmarks)."""

    def __init__(self, pods: list[dict[str, Any]] | None = None, names: ResourceNames | None = None) -> None:
        super().__init__(names)
        self.replace(pods or [])
