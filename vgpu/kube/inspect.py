"""``vgpu inspect node NAME``, ``vgpu inspect pod NS/NAME`` and the default form (``VALUE`` / ``-f FILE``).

Decodes the Volcano annotations into readable tables (or ``--json``):

- a Node: per GPU split used/total, memory used/total, cores used/total, health and mode (usage
  summed like the scheduler's ledger from ``vgpu-ids-new`` of the node's non-terminated pods),
  the handshake, the node lock and its age, and a warning for HAMi's own keys (known-failures R-3);
- a Pod: per vGPU container (the k-th ``;`` segment belongs to the k-th container requesting
  vGPU, decision 6) its devices, memory and cores, whether the plugin has served it yet, and the
  bind phase / ``vgpu-time``;
- a literal annotation value: the kind is recognised from its shape.

Live objects come from ``--kubeconfig``/``KUBECONFIG`` (else in-cluster) through the same client
the plugin uses; the pods of a node are read with a ``spec.nodeName`` field selector.
Exit status: 0 decoded, 1 something did not decode or could not be read, 2 usage.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

import yaml

from vgpu.config.model import DEFAULT_CORES_NAME, DEFAULT_COUNT_NAME, DEFAULT_MEMORY_NAME
from vgpu.inspect_cli import InspectForm
from vgpu.protocol.pod_model import ResourceNames, pod_view
from vgpu.protocol import (
    ProtocolError,
    decode_handshake,
    decode_node_lock,
    decode_pod_devices,
    decode_register,
    decode_vgpu_time,
    keys,
)

NAMES = ResourceNames(DEFAULT_COUNT_NAME, DEFAULT_MEMORY_NAME, DEFAULT_CORES_NAME)
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


def node_report(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]] | None,
                now: datetime | None = None) -> NodeReport:
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
            rep.node_lock_age_s = ((now or datetime.now(timezone.utc)) - decode_node_lock(lock)).total_seconds()
        except ProtocolError as exc:
            rep.errors.append(str(exc))
    return rep


def pod_report(pod: Mapping[str, Any], names: ResourceNames = NAMES) -> PodReport:
    meta = _meta(pod)
    ann = _annotations(pod)
    rep = PodReport(str(meta.get("namespace", "")), str(meta.get("name", "")), ann.get(keys.VGPU_NODE),
                    ann.get(keys.BIND_PHASE), ann.get(keys.VGPU_TIME), ann.get(keys.BIND_TIME))
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
        rep.containers.append(ContainerRow(k, ctr, [d.device_id for d in seg], [d.usedmem for d in seg],
                                           [d.usedcores for d in seg], served))
    return rep


def value_report(value: str) -> dict[str, Any]:
    """Decode a literal annotation value; the kind is recognised from its shape."""
    v = value.strip()
    if v.startswith(("Reported ", "Requesting_", "Deleted_")):
        return {"kind": keys.HANDSHAKE, "value": v, "decoded": describe_handshake(v)}
    if len(v) >= 20 and v[4:5] == "-" and v[10:11] == "T":
        return {"kind": keys.NODE_LOCK, "value": v, "decoded": decode_node_lock(v).isoformat()}
    if v.isdigit():
        return {"kind": keys.VGPU_TIME, "value": v,
                "decoded": "done" if v == keys.VGPU_TIME_DONE else
                datetime.fromtimestamp(decode_vgpu_time(v), timezone.utc).isoformat()}
    if ",NVIDIA-" in v or v.count(",") >= 5 and ",NVIDIA," not in v:
        return {"kind": keys.REGISTER, "value": v, "decoded": [asdict(r) for r in decode_register(v)]}
    segs = decode_pod_devices(v)
    return {"kind": f"{keys.VGPU_IDS_NEW} / {keys.DEVICES_TO_ALLOCATE}", "value": v,
            "decoded": [[asdict(d) | {"device_id": d.device_id} for d in seg] for seg in segs]}


# ---------------------------------------------------------------------------- rendering

def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    cells = [list(map(str, header))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def render_node(rep: NodeReport) -> str:
    lines = [f"Node {rep.name}"]
    if rep.gpus:
        used_note = "" if rep.pods_counted is not None else "  (no pods given: usage not computed)"
        lines.append(f"GPUs ({len(rep.gpus)}){used_note}:")
        lines += ["  " + ln for ln in _table(
            ["ID", "UUID", "TYPE", "SPLIT", "MEMORY(MiB)", "CORES(%)", "HEALTH", "MODE"],
            [(g.index, g.uuid, g.type, f"{g.split_used}/{g.split_total}", f"{g.memory_used}/{g.memory_total}",
              f"{g.cores_used}/{g.cores_total}", "healthy" if g.health else "UNHEALTHY", g.mode) for g in rep.gpus])]
    if rep.pods_counted is not None:
        lines.append(f"Pods with vGPU on this node: {rep.pods_counted}")
    lines.append(f"Handshake: {rep.handshake_decoded or 'none'}" + (f"  [{rep.handshake}]" if rep.handshake else ""))
    if rep.node_lock is not None:
        age = f", {rep.node_lock_age_s:.0f} s ago" if rep.node_lock_age_s is not None else ""
        lines.append(f"Node lock {keys.NODE_LOCK}: {rep.node_lock}{age}")
    else:
        lines.append(f"Node lock {keys.NODE_LOCK}: not held")
    lines += [f"WARNING: {w}" for w in rep.warnings] + [f"ERROR: {e}" for e in rep.errors]
    return "\n".join(lines)


def render_pod(rep: PodReport) -> str:
    lines = [f"Pod {rep.namespace}/{rep.name}"]
    t = rep.vgpu_time
    if t == keys.VGPU_TIME_DONE:
        t = f"{t} (done)"
    lines.append(f"vgpu-node: {rep.node or '-'}   bind-phase: {rep.bind_phase or '-'}   vgpu-time: {t or '-'}")
    if rep.containers:
        lines += ["  " + ln for ln in _table(
            ["SEG", "CONTAINER", "DEVICES", "MEMORY(MiB)", "CORES(%)", "SERVED"],
            [(c.segment, c.container or "?", ",".join(c.devices) or "-", ",".join(map(str, c.memory)) or "-",
              ",".join(map(str, c.cores)) or "-", {True: "yes", False: "no", None: "?"}[c.served])
             for c in rep.containers])]
    lines += [f"WARNING: {w}" for w in rep.warnings] + [f"ERROR: {e}" for e in rep.errors]
    return "\n".join(lines)


def render_value(r: Mapping[str, Any]) -> str:
    d = r["decoded"]
    if r["kind"] == keys.REGISTER:
        return f"{keys.REGISTER} ({len(d)} GPU(s)):\n" + "\n".join("  " + ln for ln in _table(
            ["ID", "UUID", "SPLIT", "MEMORY", "TYPE", "HEALTH", "MODE"],
            [(i, g["uuid"], g["count"], g["devmem"], g["type"], "healthy" if g["health"] else "UNHEALTHY", g["mode"])
             for i, g in enumerate(d)]))
    if isinstance(d, list):
        rows = []
        for k, seg in enumerate(d):
            if not seg:
                rows.append((k, "(empty: consumed)", "-", "-"))
            rows += [(k, dev["device_id"], dev["usedmem"], dev["usedcores"]) for dev in seg]
        return f"{r['kind']} ({len(d)} segment(s)):\n" + "\n".join(
            "  " + ln for ln in _table(["SEG", "DEVICE", "MEMORY", "CORES(%)"], rows))
    return f"{r['kind']}: {d}"


def _emit(reports: list[NodeReport | PodReport | dict[str, Any]], as_json: bool) -> int:
    if as_json:
        docs = [r if isinstance(r, dict) else asdict(r) for r in reports]
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
    else:
        out = []
        for r in reports:
            if isinstance(r, NodeReport):
                out.append(render_node(r))
            elif isinstance(r, PodReport):
                out.append(render_pod(r))
            else:
                out.append(render_value(r))
        print("\n\n".join(out))
    return 1 if any(getattr(r, "errors", None) for r in reports) else 0


# ---------------------------------------------------------------------------- forms

def _client(args: argparse.Namespace):
    from vgpu.kube.client import KubeClient
    return KubeClient.from_kubeconfig(getattr(args, "kubeconfig", None) or None)


def run_node(rest: list[str], args: argparse.Namespace) -> int:
    from vgpu.kube.client import KubeError
    try:
        client = _client(args)
        try:
            node = client.get_node(rest[0])
            pods = client.list_pods(field_selector=f"spec.nodeName={rest[0]}").items
        finally:
            client.close()
    except KubeError as exc:
        print(f"vgpu inspect: {exc}", file=sys.stderr)
        return 1
    return _emit([node_report(node, pods)], args.json)


def run_pod(rest: list[str], args: argparse.Namespace) -> int:
    from vgpu.kube.client import KubeError
    ns, sep, name = rest[0].partition("/")
    if not sep or not ns or not name:
        print("vgpu inspect: usage: vgpu inspect [--json] pod NAMESPACE/NAME", file=sys.stderr)
        return 2
    try:
        client = _client(args)
        try:
            pod = client.get_pod(ns, name)
        finally:
            client.close()
    except KubeError as exc:
        print(f"vgpu inspect: {exc}", file=sys.stderr)
        return 1
    return _emit([pod_report(pod)], args.json)


def _objects(docs: Iterable[Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, Mapping):
            continue
        if doc.get("kind", "").endswith("List") and isinstance(doc.get("items"), list):
            out.extend(_objects(doc["items"]))
        else:
            out.append(doc)
    return out


def reports_from_manifests(objects: Sequence[Mapping[str, Any]]) -> list[NodeReport | PodReport]:
    pods = [o for o in objects if o.get("kind") == "Pod"]
    reps: list[NodeReport | PodReport] = []
    for o in objects:
        if o.get("kind") == "Node":
            node_pods = [p for p in pods if (p.get("spec") or {}).get("nodeName") == _meta(o).get("name")]
            reps.append(node_report(o, node_pods if pods else None))
        elif o.get("kind") == "Pod":
            reps.append(pod_report(o))
    return reps


def run_default(rest: list[str], args: argparse.Namespace) -> int:
    if args.file:
        try:
            text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
            objects = _objects(yaml.safe_load_all(text))
        except (OSError, yaml.YAMLError) as exc:
            print(f"vgpu inspect: cannot read {args.file}: {exc}", file=sys.stderr)
            return 1
        reps = reports_from_manifests(objects)
        if not reps:
            print(f"vgpu inspect: {args.file} holds no Node or Pod", file=sys.stderr)
            return 1
        return _emit(reps, args.json)
    if len(rest) != 1:
        print("vgpu inspect: give one annotation VALUE (quoted), -f FILE, node NAME, pod NS/NAME or cache PATH",
              file=sys.stderr)
        return 2
    try:
        return _emit([value_report(rest[0])], args.json)
    except ProtocolError as exc:
        hint = ""
        if exc.annotation == keys.REGISTER and "has 5 fields" in str(exc):
            hint = " — the 5-field record of plugin <= v1.9; Volcano >= v1.12 rejects the whole node"
        print(f"vgpu inspect: {exc}{hint}", file=sys.stderr)
        return 1


FORMS = [
    InspectForm("node", "node NAME", "a live Node: GPUs, usage, handshake, lock", 1, run_node),
    InspectForm("pod", "pod NS/NAME", "a live Pod: devices per container, bind phase", 1, run_pod),
    InspectForm(None, "VALUE | -f FILE", "an annotation value, or Node/Pod manifests (YAML/JSON)", 0, run_default),
]
