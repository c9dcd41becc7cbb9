"""Why a pod is Pending or failed: what `vgpu inspect pod` shows beyond its annotations.

Pure functions over the API JSON (the pod, its Events, the Nodes and their pods), so the same
explanation serves the live cluster and tests.  It gathers what the scheduler and the plugin
said (the ``PodScheduled`` condition, ``FailedScheduling`` and ``VGPUAllocationFailed`` Events),
the node lock of the node the pod was assigned to, and — from each node's register annotation
and the pods already placed there — which GPUs have room for each vGPU container's request
(docs/troubleshooting.md §2 reads the output).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu.kube.reports import NAMES, node_report
from vgpu.protocol import keys
from vgpu.protocol.pod_model import BAD_QUANTITY, ResourceKind, ResourceNames, pod_view

SCHEDULER_REASONS = ("FailedScheduling", "Scheduled")
PLUGIN_REASONS = ("VGPUAllocationFailed", "VGPUKubeletShortage")


@dataclass(frozen=True)
class Request:
    """One vGPU container's request as the scheduler reads it (docs/protocol.md §4)."""

    container: str
    number: int
    memory: int | None  # None: the whole card (no memory limit)
    cores: int

    def describe(self) -> str:
        mem = "a whole card's memory" if self.memory is None else f"{self.memory} MiB"
        return f"{self.number} GPU(s) with {mem} and {self.cores} % cores each"


@dataclass(frozen=True)
class NodeFit:
    node: str
    gpus_with_room: dict[str, list[int]]  # container -> indexes of GPUs that have room for it
    fits: bool
    why_not: str = ""  # when it does not fit: the closest miss, e.g. "most free memory: 81920 MiB (GPU 0)"


@dataclass
class PodExplanation:
    pending: bool
    phase: str
    conditions: list[dict[str, str]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # scheduler and plugin Events, oldest first
    requests: list[Request] = field(default_factory=list)
    node_lock: str | None = None  # of the node the scheduler assigned (vgpu-node), when held
    lock_node: str | None = None
    fits: list[NodeFit] = field(default_factory=list)


def requests_of(pod: Mapping[str, Any], names: ResourceNames = NAMES) -> list[Request]:
    out = []
    for c in pod_view(pod, names).containers:
        number = c.limit(ResourceKind.NUMBER)
        memory = c.limit(ResourceKind.MEMORY)
        cores = c.limit(ResourceKind.CORES) or 0
        if BAD_QUANTITY in (number, memory, cores):
            continue
        out.append(Request(c.name, number if number is not None else 1, memory or None, cores))
    return out


def _fit_node(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], requests: Sequence[Request]) -> NodeFit:
    rep = node_report(node, pods)
    name = rep.name
    if not rep.gpus:
        return NodeFit(name, {}, False, rep.errors[0] if rep.errors else "no vGPU devices registered")
    free = {
        g.index: (g.split_total - g.split_used, g.memory_total - g.memory_used, 100 - g.cores_used) for g in rep.gpus
    }
    healthy = {g.index for g in rep.gpus if g.health}
    totals = {g.index: g.memory_total for g in rep.gpus}
    room: dict[str, list[int]] = {}
    why = ""
    fits = True
    for r in requests:
        ok = []
        for i, (split, mem, cores) in free.items():
            want_mem = totals[i] if r.memory is None else r.memory
            if i in healthy and split >= 1 and mem >= want_mem and cores >= r.cores:
                ok.append(i)
        room[r.container] = ok
        if len(ok) < r.number:
            fits = False
            best = max(free.items(), key=lambda kv: kv[1][1])
            why = (
                f"container {r.container}: {len(ok)} of {r.number} GPU(s) have room; "
                f"most free memory {best[1][1]} MiB on GPU {best[0]}"
            )
    return NodeFit(name, room, fits, why)


def explain_pod(
    pod: Mapping[str, Any],
    events: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    names: ResourceNames = NAMES,
) -> PodExplanation:
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    phase = str(status.get("phase") or "Pending")
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    pending = not spec.get("nodeName") and phase == "Pending"
    exp = PodExplanation(pending, phase)
    exp.conditions = [
        {k: str(c.get(k, "")) for k in ("type", "status", "reason", "message")}
        for c in status.get("conditions") or ()
        if c.get("status") != "True"
    ]
    uid = (pod.get("metadata") or {}).get("uid")
    wanted = SCHEDULER_REASONS + PLUGIN_REASONS
    exp.events = sorted(
        (
            {
                "type": e.get("type", ""),
                "reason": e.get("reason", ""),
                "message": e.get("message", ""),
                "count": e.get("count", 1),
                "source": (e.get("source") or {}).get("component", ""),
                "last": e.get("lastTimestamp") or e.get("eventTime") or "",
            }
            for e in events
            if e.get("reason") in wanted and (not uid or (e.get("involvedObject") or {}).get("uid") in (uid, None, ""))
        ),
        key=lambda e: str(e["last"]),
    )
    exp.requests = requests_of(pod, names)
    all_pods = list(pods)
    node_list = list(nodes)
    assigned = ann.get(keys.VGPU_NODE) or spec.get("nodeName")
    for n in node_list:
        meta = n.get("metadata") or {}
        if assigned and meta.get("name") == assigned:
            exp.lock_node = assigned
            exp.node_lock = (meta.get("annotations") or {}).get(keys.NODE_LOCK)
    if exp.requests and (pending or phase == "Failed"):
        exp.fits = [_fit_node(n, all_pods, exp.requests) for n in node_list]
    return exp
