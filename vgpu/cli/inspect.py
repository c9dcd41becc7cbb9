"""``vgpu inspect``: decode what the plugin, the scheduler and HAMi-core write, for humans or ``--json``.

The reports are built elsewhere and returned as data: :mod:`vgpu.kube.reports` for Nodes, Pods,
annotation values and manifests, :mod:`vgpu.hamicore.cache_report` for HAMi-core shared-region
files.  This module owns the rest: the arguments, reading the live objects (through the same
client the plugin uses, from ``--kubeconfig``/``KUBECONFIG``, else in-cluster; the pods of a
node with a ``spec.nodeName`` field selector) or the files, and rendering the reports as text
tables or JSON.

Each *form* (``cache PATH``, ``node NAME``, ``pod NS/NAME``, or the default form: a literal
annotation VALUE / ``-f FILE``) is a row of ``FORMS``.  The first operand picks a form by
keyword; anything else goes to the default form (``keyword=None``).
Exit status: 0 decoded, 1 something did not decode or could not be read, 2 usage.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import yaml

from vgpu.cli import help_line
from vgpu.kube.reports import (
    NodeReport,
    PodReport,
    manifest_objects,
    node_report,
    pod_report,
    reports_from_manifests,
    value_report,
)
from vgpu.protocol import ProtocolError, keys

if TYPE_CHECKING:  # the native reader is imported when the cache form runs, not for `vgpu inspect --help`
    from vgpu.hamicore.region import RegionSnapshot, SlotInfo


@dataclass(frozen=True)
class InspectForm:
    keyword: str | None  # first operand that selects the form; None = the default form
    usage: str  # e.g. "cache PATH"
    summary: str
    nargs: int  # number of operands after the keyword (default form: after nothing)
    run: Callable[[list[str], argparse.Namespace], int]  # returns the exit status


# ---------------------------------------------------------------------------- Node / Pod / value rendering


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    cells = [list(map(str, header))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in cells]


def render_node(rep: NodeReport) -> str:
    lines = [f"Node {rep.name}"]
    if rep.gpus:
        used_note = "" if rep.pods_counted is not None else "  (no pods given: usage not computed)"
        lines.append(f"GPUs ({len(rep.gpus)}){used_note}:")
        lines += [
            "  " + ln
            for ln in _table(
                ["ID", "UUID", "TYPE", "SPLIT", "MEMORY(MiB)", "CORES(%)", "HEALTH", "MODE"],
                [
                    (
                        g.index,
                        g.uuid,
                        g.type,
                        f"{g.split_used}/{g.split_total}",
                        f"{g.memory_used}/{g.memory_total}",
                        f"{g.cores_used}/{g.cores_total}",
                        "healthy" if g.health else "UNHEALTHY",
                        g.mode,
                    )
                    for g in rep.gpus
                ],
            )
        ]
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
        lines += [
            "  " + ln
            for ln in _table(
                ["SEG", "CONTAINER", "DEVICES", "MEMORY(MiB)", "CORES(%)", "SERVED"],
                [
                    (
                        c.segment,
                        c.container or "?",
                        ",".join(c.devices) or "-",
                        ",".join(map(str, c.memory)) or "-",
                        ",".join(map(str, c.cores)) or "-",
                        {True: "yes", False: "no", None: "?"}[c.served],
                    )
                    for c in rep.containers
                ],
            )
        ]
    lines += [f"WARNING: {w}" for w in rep.warnings] + [f"ERROR: {e}" for e in rep.errors]
    return "\n".join(lines)


def render_value(r: Mapping[str, Any]) -> str:
    d = r["decoded"]
    if r["kind"] == keys.REGISTER:
        return f"{keys.REGISTER} ({len(d)} GPU(s)):\n" + "\n".join(
            "  " + ln
            for ln in _table(
                ["ID", "UUID", "SPLIT", "MEMORY", "TYPE", "HEALTH", "MODE"],
                [
                    (
                        i,
                        g["uuid"],
                        g["count"],
                        g["devmem"],
                        g["type"],
                        "healthy" if g["health"] else "UNHEALTHY",
                        g["mode"],
                    )
                    for i, g in enumerate(d)
                ],
            )
        )
    if isinstance(d, list):
        rows = []
        for k, seg in enumerate(d):
            if not seg:
                rows.append((k, "(empty: consumed)", "-", "-"))
            rows += [(k, dev["device_id"], dev["usedmem"], dev["usedcores"]) for dev in seg]
        return f"{r['kind']} ({len(d)} segment(s)):\n" + "\n".join(
            "  " + ln for ln in _table(["SEG", "DEVICE", "MEMORY", "CORES(%)"], rows)
        )
    return f"{r['kind']}: {d}"


def _emit(reports: Sequence[NodeReport | PodReport | dict[str, Any]], as_json: bool) -> int:
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


# ---------------------------------------------------------------------------- shared-region rendering

_MIB = 2**20
_STATUS = {0: "exited", 1: "running", 2: "suspended"}


def _mib(n: int) -> str:
    return f"{n / _MIB:.0f} MiB" if n % _MIB == 0 else f"{n} B"


def _when(ts: int | None) -> str:
    if ts is None:
        return "n/a (layout has none)"
    if ts == 0:
        return "0"
    try:
        return f"{ts} ({datetime.datetime.fromtimestamp(ts, datetime.UTC):%Y-%m-%dT%H:%M:%SZ})"
    except (OverflowError, OSError, ValueError):
        return str(ts)


def render_cache(snap: RegionSnapshot, slots: list[SlotInfo]) -> str:
    lines = [
        f"file:        {snap.path}",
        f"layout:      {snap.layout_name}"
        + (f" (header {snap.version})" if snap.version else " (no version fields)")
        + f", {snap.file_size} bytes",
        f"devices:     device_num {snap.device_num_raw}" + (" (clamped to 16)" if snap.device_num_raw > 16 else ""),
        f"processes:   proc_num {snap.proc_num_raw}, {snap.live_procs} in use"
        + (", read under the seqlock" if snap.seqlocked else ""),
        f"feedback:    priority {snap.priority}, utilization_switch {snap.utilization_switch}, "
        f"recent_kernel {snap.recent_kernel}",
        f"last kernel: {_when(snap.last_kernel_time)}",
    ]
    shown = max(snap.device_num, 1)
    lines.append(
        "limits:      "
        + ", ".join(
            f"[{d}] {_mib(snap.limits[d]) if snap.limits[d] else 'unlimited'} / SM {snap.sm_limits[d]}%"
            for d in range(shown)
        )
    )
    for dev in snap.devices:
        lines.append(
            f"device {dev.vdevice_index}:    {dev.uuid}  used {_mib(dev.used_bytes)} "
            f"(context {_mib(dev.context_bytes)}, "
            f"data {_mib(dev.data_bytes)})  monitor {_mib(dev.monitor_used_bytes)}  "
            f"sm_util {dev.sm_util}%  procs {dev.procs}"
        )
    for d in snap.invalid_uuid_devices:
        lines.append(f"device {d}:    <invalid uuid, skipped>")
    for s in slots:
        state = _STATUS.get(s.status, f"status {s.status}")
        head = f"slot {s.index:<4}    pid {s.pid} hostpid {s.hostpid} {state}" + ("" if s.in_use else " (not in use)")
        if s.seqlock:
            head += f" seq {s.seqlock}"
        if not s.consistent:
            lines.append(head + "  <seqlock did not settle; counters not read>")
            continue
        usage = "  ".join(
            f"d{d}: {_mib(u.total_bytes)}" + (f" sm {u.sm_util}%" if u.sm_util else "")
            for d, u in enumerate(s.devices)
            if u.total_bytes or u.sm_util or u.monitor_used_bytes
        )
        lines.append(head + ("  " + usage if usage else ""))
    for a in snap.anomalies:
        lines.append(f"anomaly:     {a}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- forms


def _client(args: argparse.Namespace):
    """The cluster kubectl would use: --kubeconfig, KUBECONFIG (merged), ~/.kube/config, in-cluster."""
    import os

    from vgpu.kube.client import KubeClient, load_user_configuration

    cfg = load_user_configuration(
        getattr(args, "kubeconfig", None) or None, os.environ, context=getattr(args, "context", None)
    )
    return KubeClient(cfg, user_agent="vgpu-inspect")


def render_explanation(exp: Any) -> str:
    """The "why" part of `vgpu inspect pod` (vgpu/kube/explain.py)."""
    lines = []
    state = "Pending, not bound to a node" if exp.pending else exp.phase
    lines.append(f"State: {state}")
    for c in exp.conditions:
        lines.append(f"Condition {c['type']}={c['status']} ({c['reason'] or '-'}): {c['message'] or '-'}")
    if exp.events:
        lines.append("Events (scheduler and plugin):")
        for e in exp.events:
            times = f" (x{e['count']})" if e["count"] and int(e["count"]) > 1 else ""
            lines.append(f"  {e['type']} {e['reason']} from {e['source'] or '?'}{times}: {e['message']}")
    elif exp.pending:
        lines.append("Events: none from the scheduler yet (is a Volcano scheduler running, schedulerName: volcano?)")
    if exp.lock_node is not None:
        held = exp.node_lock or "not held"
        lines.append(f"Node lock {keys.NODE_LOCK} on {exp.lock_node}: {held}")
    if exp.requests:
        lines.append("Request: " + "; ".join(f"{r.container}: {r.describe()}" for r in exp.requests))
    if exp.fits:
        lines.append("Where it would fit (from the nodes' register annotations and the pods placed there):")
        for f in exp.fits:
            if f.fits:
                room = "; ".join(f"{c}: GPU {','.join(map(str, ids))}" for c, ids in f.gpus_with_room.items())
                lines.append(f"  {f.node}: fits now ({room})")
            else:
                lines.append(f"  {f.node}: does not fit: {f.why_not}")
        if not any(f.fits for f in exp.fits):
            lines.append("  no node has room: lower the request, or free GPUs (see docs/troubleshooting.md)")
    return "\n".join(lines)


def run_node(rest: list[str], args: argparse.Namespace) -> int:
    from vgpu.kube.client import KubeConfigError, KubeError

    try:
        client = _client(args)
        try:
            node = client.get_node(rest[0])
            pods = client.list_pods(field_selector=f"spec.nodeName={rest[0]}").items
        finally:
            client.close()
    except KubeConfigError as exc:
        print(f"vgpu inspect: {exc}", file=sys.stderr)
        return 2
    except KubeError as exc:
        print(f"vgpu inspect: {exc}", file=sys.stderr)
        return 1
    return _emit([node_report(node, pods)], args.json)


def run_pod(rest: list[str], args: argparse.Namespace) -> int:
    from vgpu.kube.client import KubeConfigError, KubeError

    ns, sep, name = rest[0].partition("/")
    if not sep or not ns or not name:
        print("vgpu inspect: usage: vgpu inspect [--json] pod NAMESPACE/NAME", file=sys.stderr)
        return 2
    from vgpu.kube.explain import explain_pod

    try:
        client = _client(args)
        try:
            pod = client.get_pod(ns, name)
            exp = None
            unbound = not (pod.get("spec") or {}).get("nodeName")
            failed = (pod.get("status") or {}).get("phase") == "Failed" or (
                (pod.get("metadata") or {}).get("annotations") or {}
            ).get(keys.BIND_PHASE) == "failed"
            if unbound or failed:
                events = client.list_events(ns, field_selector=f"involvedObject.name={name}").items
                nodes = client.list_nodes().items
                pods = client.list_pods().items
                exp = explain_pod(pod, events, nodes, pods)
        finally:
            client.close()
    except KubeConfigError as exc:
        print(f"vgpu inspect: {exc}", file=sys.stderr)
        return 2
    except KubeError as exc:
        print(f"vgpu inspect: {exc}", file=sys.stderr)
        return 1
    rep = pod_report(pod)
    if args.json:
        doc = asdict(rep)
        if exp is not None:
            doc["explanation"] = asdict(exp)
        print(json.dumps(doc, indent=2))
        return 1 if rep.errors else 0
    print(render_pod(rep) + ("\n" + render_explanation(exp) if exp is not None else ""))
    return 1 if rep.errors else 0


def run_default(rest: list[str], args: argparse.Namespace) -> int:
    if args.file:
        try:
            text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
            objects = manifest_objects(yaml.safe_load_all(text))
        except (OSError, yaml.YAMLError) as exc:
            print(f"vgpu inspect: cannot read {args.file}: {' '.join(str(exc).split())}", file=sys.stderr)
            return 1
        reps = reports_from_manifests(objects)
        if not reps:
            print(f"vgpu inspect: {args.file} holds no Node or Pod", file=sys.stderr)
            return 1
        return _emit(reps, args.json)
    if len(rest) != 1:
        print(
            "vgpu inspect: give one annotation VALUE (quoted), -f FILE, node NAME, pod NS/NAME or cache PATH",
            file=sys.stderr,
        )
        return 2
    try:
        return _emit([value_report(rest[0])], args.json)
    except ProtocolError as exc:
        hint = ""
        if exc.annotation == keys.REGISTER and "has 5 fields" in str(exc):
            hint = " — the 5-field record of plugin <= v1.9; Volcano >= v1.12 rejects the whole node"
        print(f"vgpu inspect: {exc}{hint}", file=sys.stderr)
        return 1


def run_cache(operands: list[str], args: argparse.Namespace) -> int:
    from vgpu.hamicore.cache_report import inspect_cache, report_dict  # the native reader: only for this form
    from vgpu.hamicore.region import RegionError

    path = operands[0]
    try:
        snap, slots = inspect_cache(path)
    except RegionError as exc:
        if args.json:
            print(json.dumps({"path": path, "error": {"code": exc.code.name, "message": str(exc)}}))
        print(f"vgpu inspect: {exc} [{exc.code.name}]", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report_dict(snap, slots), indent=1))
    else:
        print(render_cache(snap, slots))
    return 0


FORMS: list[InspectForm] = [
    InspectForm("cache", "cache PATH", "decode a HAMi-core shared-region file", 1, run_cache),
    InspectForm("node", "node NAME", "a live Node: GPUs, usage, handshake, lock", 1, run_node),
    InspectForm("pod", "pod NS/NAME", "a live Pod: devices per container, bind phase", 1, run_pod),
    InspectForm(None, "VALUE | -f FILE", "an annotation value, or Node/Pod manifests (YAML/JSON)", 0, run_default),
]


def load_forms() -> dict[str | None, InspectForm]:
    forms: dict[str | None, InspectForm] = {}
    for form in FORMS:
        if form.keyword in forms:
            raise RuntimeError(f"inspect form {form.keyword!r} is registered twice")
        forms[form.keyword] = form
    return forms


def configure(parser: argparse.ArgumentParser) -> None:
    forms = load_forms()
    lines = "\n".join(
        f"  vgpu inspect [--json] {f.usage:<22} {f.summary}"
        for f in sorted(forms.values(), key=lambda f: f.keyword or "")
    )
    parser.description = "Decode what vgpu, the Volcano scheduler and HAMi-core write.\n\nforms:\n" + lines
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("-f", "--file", metavar="FILE", help="read the input from FILE ('-' = stdin)")
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        default=None,
        help="for node/pod: kubeconfig of the cluster, as kubectl finds it "
        "(default: $KUBECONFIG, a colon list merged; else ~/.kube/config; else in-cluster)",
    )
    parser.add_argument(
        "--context",
        metavar="NAME",
        default=None,
        help="for node/pod: the kubeconfig context (default: its current one)",
    )
    parser.add_argument("operands", nargs="*", metavar="FORM", help="e.g. cache PATH")
    parser.set_defaults(func=run, _inspect_parser=parser)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``inspect`` to ``subparsers``, configured at once (for a parser of its own)."""
    configure(subparsers.add_parser("inspect", help=help_line("inspect")))


def run(args: argparse.Namespace) -> int:
    forms = load_forms()
    operands: list[str] = list(args.operands)
    if operands and operands[0] in forms:
        form = forms[operands[0]]
        rest = operands[1:]
    elif None in forms:
        form, rest = forms[None], operands
    else:
        what = operands[0] if operands else (f"-f {args.file}" if args.file else "nothing")
        known = ", ".join(f.usage for f in forms.values())
        print(f"vgpu inspect: no decoder for {what!r} (available: {known})", file=sys.stderr)
        return 2
    if form.keyword is not None and len(rest) != form.nargs:
        print(f"vgpu inspect: usage: vgpu inspect [--json] {form.usage}", file=sys.stderr)
        return 2
    return form.run(rest, args)
