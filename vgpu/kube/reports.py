"""Reports on the Volcano annotations of Nodes and Pods, as data (`vgpu inspect node|pod|VALUE|-f`).

Builds, from objects already read, what ``vgpu inspect`` shows (the command line in
:mod:`vgpu.cli.inspect` reads the objects and renders these reports as tables or ``--json``):

- a Node (`NodeReport`): per GPU split used/total, memory used/total, cores used/total, health and
  mode (usage summed like the scheduler's ledger from ``vgpu-ids-new`` of the node's
  non-terminated pods), the handshake, the node lock and its age, and a warning for HAMi's own
  keys (docs/failures.md R-3);
- a Pod (`PodReport`): per vGPU container (the k-th ``;`` segment belongs to the k-th container
  requesting vGPU, docs/decisions.md decision 6) its devices, memory and cores, whether the plugin has served it
  yet, and the bind phase / ``vgpu-time``;
- a literal annotation value (a dict): the kind is recognised from its shape;
- Node/Pod manifests (`reports_from_manifests`).

Pure: no API access, no files, no printing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from vgpu.config.model import DEFAULT_CORES_NAME, DEFAULT_COUNT_NAME, DEFAULT_MEMORY_NAME
from vgpu.protocol import (
    ProtocolError,
    decode_handshake,
    decode_node_lock,
    decode_pod_devices,
    decode_register,
    decode_vgpu_time,
    keys,
)
from vgpu.protocol.pod_model import ResourceNames, pod_view

NAMES = ResourceNames(DEFAULT_COUNT_NAME, DEFAULT_MEMORY_NAME, DEFAULT_CORES_NAME)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_LAST_SECOND: Final = int((datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - _EPOCH).total_seconds())


def describe_unix_seconds(seconds: int) -> str:
    """A ``vgpu-time`` as a UTC date, or why it has none: any uint64 is a valid value, but a
    calendar date past year 9999 is not representable (``datetime.fromtimestamp`` raised there)."""
    if seconds > _LAST_SECOND:
        return f"{seconds} s after the epoch (after 9999-12-31T23:59:59Z: no calendar date)"
    return (_EPOCH + timedelta(seconds=seconds)).isoformat()


HAMI_WARNING = "HAMi plugin detected; Volcano ignores these"


# ---------------------------------------------------------------------------- model


@dataclass
class GpuRow:
    index: int
    uuid: str
    type: str
    split_used: int
    split_total: int
    memory_used: int
    memory_total: int
    cores_used: int
    cores_total: int
    health: bool
    mode: str


@dataclass
class NodeReport:
    name: str
    gpus: list[GpuRow] = field(default_factory=list)
    handshake: str | None = None
    handshake_decoded: str | None = None
    node_lock: str | None = None
    node_lock_age_s: float | None = None
    pods_counted: int | None = None
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class ContainerRow:
    segment: int
    container: str | None
    devices: list[str]
    memory: list[int]
    cores: list[int]
    served: bool | None


@dataclass
class PodReport:
    namespace: str
    name: str
    node: str | None = None
    bind_phase: str | None = None
    vgpu_time: str | None = None
    bind_time: str | None = None
    containers: list[ContainerRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------- decoding


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("annotations") or {}


def _terminated(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def describe_handshake(value: str) -> str:
    try:
        hs = decode_handshake(value)
    except ProtocolError as exc:
        return f"unrecognised ({exc.reason}); Volcano treats it as answered"
    if hs.kind == "Reported":
        return f"Reported by the plugin at {hs.time.isoformat()}"
    state = "waiting for the plugin" if hs.kind == "Requesting" else "node dropped by the scheduler"
    return f"{hs.kind} by the scheduler at {hs.time:%Y-%m-%d %H:%M:%S} (scheduler-local, no zone): {state}"


def node_report(
    node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]] | None, now: datetime | None = None
) -> NodeReport:
    name = str(_meta(node).get("name", ""))
    ann = _annotations(node)
    rep = NodeReport(name)
    hami = sorted(k for k in ann if k.startswith("hami.io/"))
    if hami:
        rep.warnings.append(f"{', '.join(hami)}: {HAMI_WARNING}")
    reg = ann.get(keys.REGISTER)
    if reg is None:
        rep.errors.append(f"no {keys.REGISTER}: Volcano sees no vGPU devices on this node")
    else:
        try:
            records = decode_register(reg)
        except ProtocolError as exc:
            records = ()
            rep.errors.append(str(exc))
        used = {r.uuid: [0, 0, 0] for r in records}
        if pods is not None:
            rep.pods_counted = 0
            for pod in pods:
                if (pod.get("spec") or {}).get("nodeName") != name or _terminated(pod):
                    continue
                ids = _annotations(pod).get(keys.VGPU_IDS_NEW)
                if not ids:
                    continue
                try:
                    segments = decode_pod_devices(ids, annotation=keys.VGPU_IDS_NEW)
                except ProtocolError as exc:
                    rep.errors.append(f"pod {_meta(pod).get('namespace')}/{_meta(pod).get('name')}: {exc}")
                    continue
                rep.pods_counted += 1
                for seg in segments:
                    for d in seg:
                        for uuid, u in used.items():
                            if uuid in d.uuid:  # the scheduler matches by substring
                                u[0] += 1
                                u[1] += d.usedmem
                                u[2] += d.usedcores
        for i, r in enumerate(records):
            u = used[r.uuid]
            rep.gpus.append(GpuRow(i, r.uuid, r.type, u[0], r.count, u[1], r.devmem, u[2], 100, r.health, r.mode))
    hs = ann.get(keys.HANDSHAKE)
    if hs is not None:
        rep.handshake = hs
        rep.handshake_decoded = describe_handshake(hs)
    lock = ann.get(keys.NODE_LOCK)
    if lock is not None:
        rep.node_lock = lock
        try:
            rep.node_lock_age_s = ((now or datetime.now(UTC)) - decode_node_lock(lock)).total_seconds()
        except ProtocolError as exc:
            rep.errors.append(str(exc))
    return rep


def pod_report(pod: Mapping[str, Any], names: ResourceNames = NAMES) -> PodReport:
    meta = _meta(pod)
    ann = _annotations(pod)
    rep = PodReport(
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        ann.get(keys.VGPU_NODE),
        ann.get(keys.BIND_PHASE),
        ann.get(keys.VGPU_TIME),
        ann.get(keys.BIND_TIME),
    )
    if rep.vgpu_time is not None and rep.vgpu_time != keys.VGPU_TIME_DONE:
        try:
            decode_vgpu_time(rep.vgpu_time)
        except ProtocolError as exc:
            rep.errors.append(str(exc))
    view = pod_view(pod, names)
    if view.init_requests_vgpu:
        rep.warnings.append("an init container requests vGPU: the plugin refuses such pods")
    ids = ann.get(keys.VGPU_IDS_NEW)
    if ids is None:
        if view.containers:
            rep.warnings.append(f"no {keys.VGPU_IDS_NEW}: not scheduled by Volcano's vGPU plugin (yet)")
        return rep
    try:
        assigned = decode_pod_devices(ids, annotation=keys.VGPU_IDS_NEW)
    except ProtocolError as exc:
        rep.errors.append(str(exc))
        return rep
    remaining: Sequence[Any] | None = None
    dta = ann.get(keys.DEVICES_TO_ALLOCATE)
    if dta is not None:
        try:
            remaining = decode_pod_devices(dta)
        except ProtocolError as exc:
            rep.errors.append(str(exc))
    if len(assigned) != len(view.containers):
        rep.warnings.append(f"{len(assigned)} segment(s) for {len(view.containers)} container(s) requesting vGPU")
    for k, seg in enumerate(assigned):
        ctr = view.containers[k].name if k < len(view.containers) else None
        served = None if remaining is None or k >= len(remaining) else not remaining[k]
        rep.containers.append(
            ContainerRow(
                k, ctr, [d.device_id for d in seg], [d.usedmem for d in seg], [d.usedcores for d in seg], served
            )
        )
    return rep


def value_report(value: str) -> dict[str, Any]:
    """Decode a literal annotation value; the kind is recognised from its shape."""
    v = value.strip()
    if v.startswith(("Reported ", "Requesting_", "Deleted_")):
        return {"kind": keys.HANDSHAKE, "value": v, "decoded": describe_handshake(v)}
    if len(v) >= 20 and v[4:5] == "-" and v[10:11] == "T":
        return {"kind": keys.NODE_LOCK, "value": v, "decoded": decode_node_lock(v).isoformat()}
    if v.isdigit():
        return {
            "kind": keys.VGPU_TIME,
            "value": v,
            "decoded": "done" if v == keys.VGPU_TIME_DONE else describe_unix_seconds(decode_vgpu_time(v)),
        }
    if ",NVIDIA-" in v or v.count(",") >= 5 and ",NVIDIA," not in v:
        return {"kind": keys.REGISTER, "value": v, "decoded": [asdict(r) for r in decode_register(v)]}
    segs = decode_pod_devices(v)
    return {
        "kind": f"{keys.VGPU_IDS_NEW} / {keys.DEVICES_TO_ALLOCATE}",
        "value": v,
        "decoded": [[asdict(d) | {"device_id": d.device_id} for d in seg] for seg in segs],
    }


# ---------------------------------------------------------------------------- manifests


def manifest_objects(docs: Iterable[Any]) -> list[Mapping[str, Any]]:
    """The objects of parsed YAML/JSON documents, with ``*List`` kinds flattened; non-mappings skipped."""
    out: list[Mapping[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, Mapping):
            continue
        if doc.get("kind", "").endswith("List") and isinstance(doc.get("items"), list):
            out.extend(manifest_objects(doc["items"]))
        else:
            out.append(doc)
    return out


def reports_from_manifests(objects: Sequence[Mapping[str, Any]]) -> list[NodeReport | PodReport]:
    """One report per Node and Pod, in order; a Node's usage counts the given Pods bound to it."""
    pods = [o for o in objects if o.get("kind") == "Pod"]
    reps: list[NodeReport | PodReport] = []
    for o in objects:
        if o.get("kind") == "Node":
            node_pods = [p for p in pods if (p.get("spec") or {}).get("nodeName") == _meta(o).get("name")]
            reps.append(node_report(o, node_pods if pods else None))
        elif o.get("kind") == "Pod":
            reps.append(pod_report(o))
    return reps
