"""Pods without an API server: manifests as the API returns them, and a fixed pod index for the monitor."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Mapping, Sequence
from typing import Any

from vgpu.config.model import DEFAULT_COUNT_NAME
from vgpu.monitor.pods import PodIndex
from vgpu.protocol import keys
from vgpu.protocol.pod_devices import ContainerDevice, encode_pod_devices
from vgpu.protocol.pod_model import ResourceNames


def new_uid() -> str:
    return str(uuidlib.uuid4())


def container_specs(
    containers: Sequence[str],
    gpus: Mapping[str, Sequence[str]] | None = None,
    env: Mapping[str, Mapping[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """``spec.containers``: those named in ``gpus`` request one vGPU per GPU; ``env`` literal values."""
    out: list[dict[str, Any]] = []
    for c in containers:
        spec: dict[str, Any] = {"name": c, "image": "busybox:1.36"}
        if gpus and c in gpus:
            spec["resources"] = {"limits": {DEFAULT_COUNT_NAME: str(len(gpus[c]))}}
        if env and c in env:
            spec["env"] = [{"name": k, "value": v} for k, v in env[c].items()]
        out.append(spec)
    return out


def assignment_annotations(containers: Sequence[str], gpus: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """What the scheduler and the plugin leave on a served pod: ``vgpu-ids-new`` (segment k = the
    k-th container in ``gpus``, spec order) and ``bind-phase=success`` (docs/protocol.md §3.1)."""
    segments = [[ContainerDevice(u, 100, 0) for u in gpus[c]] for c in containers if c in gpus]
    return {keys.VGPU_IDS_NEW: encode_pod_devices(segments, annotation=keys.VGPU_IDS_NEW), keys.BIND_PHASE: "success"}


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
    gpus: Mapping[str, Sequence[str]] | None = None,
    env: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """A pod manifest; ``gpus`` (container → GPU UUIDs) makes it a served vGPU pod (limits + annotations)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "1"}
    if gpus:
        annotations = {**assignment_annotations(containers, gpus), **(annotations or {})}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": container_specs(containers, gpus, env)},
        "status": {"phase": phase},
    }


class StaticPods(PodIndex):
    """A fixed, synced set of pods, in place of the node's pod watch (tests and benchmarks)."""

    def __init__(self, pods: list[dict[str, Any]] | None = None, names: ResourceNames | None = None) -> None:
        super().__init__(names)
        self.replace(pods or [])
