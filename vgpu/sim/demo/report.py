"""What `vgpu demo` shows and returns: the status tables, the checks, the summary and the JSON.

Pure functions over the demo's state (:class:`DemoState`); the flow in :mod:`vgpu.sim.demo.flow`
fills that state in, the printer draws the lines built here.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

from vgpu.protocol import ProtocolError, decode_pod_devices, decode_register, keys
from vgpu.sim.demo.metrics import Sample, per_pod
from vgpu.sim.demo.options import DemoOptions
from vgpu.sim.demo.pods import EXPECT_SUCCESS, RUNNING, PodRecord
from vgpu.sim.demo.render import Printer, fit_table, human_bytes, short_uuid
from vgpu.sim.demo.workload import HamiCoreContainer, MigContainer

EXIT_OK = 0
EXIT_COMPONENT = 1
EXIT_USAGE = 2
EXIT_CHECKS = 3
EXIT_INTERRUPTED = 130


@dataclass
class Check:
    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class XidRecord:
    node: str
    index: int
    uuid: str
    xid: int
    injected_at: float
    unhealthy_at: float | None = None
    kubelet_healthy: dict[str, str] = field(default_factory=dict)  # resource -> "healthy/total"
    register_health: bool | None = None


@dataclass
class DemoState:
    """Everything the demo learnt; the flow writes it, the report reads it."""

    options: DemoOptions
    workdir: str = ""
    api_url: str = ""
    nodes: list[dict[str, Any]] = field(default_factory=list)  # per node, filled at the end
    registers: dict[str, str] = field(default_factory=dict)  # node -> register annotation (live)
    pods: list[PodRecord] = field(default_factory=list)
    samples: dict[str, list[Sample]] = field(default_factory=dict)  # node -> last scrape
    metrics_urls: dict[str, str] = field(default_factory=dict)
    metrics_seen: dict[str, float] = field(default_factory=dict)  # pod -> first time with values
    feedback_notes: list[dict[str, Any]] = field(default_factory=list)
    xid: XidRecord | None = None
    mig: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    interrupted: bool = False
    component_failed: bool = False
    elapsed: float = 0.0

    # ---------------------------------------------------------------- derived

    def containers(self) -> list[Any]:
        return [c for p in self.pods for c in p.containers]

    def hami_pods(self) -> list[PodRecord]:
        """Running pods with at least one HAMi-core container: their usage must reach /metrics."""
        return [
            p for p in self.pods if p.state == RUNNING and any(isinstance(c, HamiCoreContainer) for c in p.containers)
        ]

    def node_health(self, node: str) -> dict[str, bool]:
        value = self.registers.get(node, "")
        try:
            return {r.uuid: r.health for r in decode_register(value)} if value else {}
        except ProtocolError:
            return {}


# -------------------------------------------------------------------- tables


def _gpu_rows(state: DemoState) -> list[list[str]]:
    usage: dict[str, tuple[int, int, int]] = {}  # uuid -> (bytes, sm, containers)
    for c in state.containers():
        for uuid, (used, sm) in c.usage_by_uuid().items():
            b, s, n = usage.get(uuid, (0, 0, 0))
            usage[uuid] = (b + used, s + sm, n + 1)
    mig_on: dict[str, int] = {}
    for p in state.pods:
        for c in p.containers:
            if isinstance(c, MigContainer) and p.scheduled_annotations.get(keys.VGPU_IDS_NEW):
                for seg in _segments(p.scheduled_annotations[keys.VGPU_IDS_NEW]):
                    for d in seg:
                        mig_on[d.uuid] = mig_on.get(d.uuid, 0) + 1
    rows = []
    for spec in state.options.nodes:
        health = state.node_health(spec.name)
        for i, g in enumerate(spec.gpus):
            b, sm, n = usage.get(g.uuid, (0, 0, 0))
            ok = health.get(g.uuid)
            shown = "—" if ok is None else ("ok" if ok else "UNHEALTHY")
            n += mig_on.get(g.uuid, 0)
            mem = f"{human_bytes(b)}/{human_bytes(g.memory_mib << 20)}".replace(" GiB/", "/", 1)
            rows.append(
                [
                    spec.name,
                    str(i),
                    short_uuid(g.uuid, 4),
                    g.name.removeprefix("NVIDIA "),
                    spec.mode,
                    shown,
                    str(n),
                    mem,
                    f"{min(sm, 100)}%" if spec.mode != "mig" else "n/a",
                ]
            )
    return rows


def _segments(value: str) -> tuple:
    try:
        return decode_pod_devices(value, annotation=keys.VGPU_IDS_NEW)
    except ProtocolError:
        return ()


def _devices_text(p: PodRecord) -> str:
    value = p.scheduled_annotations.get(keys.VGPU_IDS_NEW)
    if not value:
        return "—"
    parts = []
    for seg in _segments(value):
        devs = [
            f"{short_uuid(d.uuid, 4)}{f'[{d.mig.group}-{d.mig.position}]' if d.mig else ''} "
            f"{d.usedmem}MiB/{d.usedcores}%"
            for d in seg
        ]
        parts.append(", ".join(devs) or "—")
    return "; ".join(parts)


def _pod_rows(state: DemoState) -> list[list[str]]:
    rows = []
    for p in state.pods:
        detail = p.skipped or (p.reason if p.state != RUNNING else "")
        rows.append(
            [
                p.key.removeprefix("default/"),
                p.node or "—",
                p.state,
                p.bind_phase or "—",
                _devices_text(p),
                detail,
            ]
        )
    return rows


def _container_rows(state: DemoState, printer: Printer) -> list[list[str]]:
    rows = []
    for c in state.containers():
        if isinstance(c, HamiCoreContainer):
            for d, u in enumerate(c.uuids):
                fb = c.feedback
                if fb.blocked:
                    fbt = printer.paint("blocked rk=-1", "yellow")
                elif c.sm_util[d]:
                    fbt = f"active rk={fb.recent_kernel} sw={fb.utilization_switch}"
                else:
                    fbt = f"idle rk={fb.recent_kernel} sw={fb.utilization_switch}"
                limit = c.limits[d]
                rows.append(
                    [
                        f"{c.pod.removeprefix('default/')}/{c.name}" if d == 0 else "",
                        short_uuid(u, 4),
                        f"{human_bytes(c.used[d])}/{human_bytes(limit) if limit else '∞'}".replace(" GiB/", "/", 1),
                        f"{c.sm_util[d]}%/{c.sm_limits[d] or 100}%",
                        str(c.priority) if d == 0 else "",
                        fbt,
                    ]
                )
        else:
            rows.append(
                [
                    f"{c.pod.removeprefix('default/')}/{c.name}",
                    ",".join(short_uuid(u, 4) for u in c.mig_uuids),
                    "MIG instance",
                    "—",
                    "—",
                    "no HAMi-core (MIG isolation)",
                ]
            )
    return rows


def board_lines(state: DemoState, printer: Printer) -> list[str]:
    b = printer.paint
    w = printer.width
    out = ["", b("GPUs", "bold")]
    out += fit_table(
        ["NODE", "GPU", "UUID", "MODEL", "MODE", "HEALTH", "CTRS", "MEM USED", "SM"],
        _gpu_rows(state),
        right=(1, 6, 8),
        width=w,
        wrap=(3, 7, 0, 4),  # MODEL, then MEMORY USED; NODE and MODE only on a very narrow terminal
    )
    out += ["", b("Pods (namespace default unless shown)", "bold")]
    out += fit_table(
        ["POD", "NODE", "STATE", "BIND", "DEVICES", "NOTE"],
        _pod_rows(state),
        width=w,
        wrap=(4, 0, 1),
        notes=(5,),
    )
    crow = _container_rows(state, printer)
    if crow:
        out += ["", b("Containers (HAMi-core shared regions; namespace default unless shown)", "bold")]
        out += fit_table(
            ["POD/CONTAINER", "GPU", "MEM used/max", "SM used/max", "PRIO", "FEEDBACK"],
            crow,
            right=(4,),
            width=w,
            wrap=(5, 0, 2, 3),
        )
    if state.metrics_urls:
        out += [""] + [f"  metrics {n}: {u}" for n, u in state.metrics_urls.items()]
    return out


# -------------------------------------------------------------------- checks


def checks(state: DemoState) -> list[Check]:
    out: list[Check] = []
    regs = [n for n in state.nodes if n.get("registered")]
    out.append(
        Check(
            "registration",
            len(regs) == len(state.options.nodes),
            f"{len(regs)}/{len(state.options.nodes)} node(s): 3 resources at the kubelet, register "
            "annotation (+ handshake up to v1.15) on the Node",
        )
    )
    bad = [p for p in state.pods if not p.as_expected]
    out.append(
        Check(
            "pods",
            not bad and bool(state.pods),
            "no sample pod was submitted"
            if not state.pods
            else "every sample pod as expected"
            if not bad
            else "; ".join(f"{p.key}: {p.state} (expected {p.example.expect}) {p.reason}".strip() for p in bad),
        )
    )
    multi = [p for p in state.pods if p.admission is not None and any(not c.devices for c in p.admission.containers)]
    if any(_has_plain_container(p) for p in state.pods if not p.skipped):
        ok = any(p.as_expected and p.state == RUNNING for p in multi)
        out.append(
            Check(
                "multi-container",
                ok,
                "a pod with a container without GPU got bind-phase=success, that container no devices"
                if ok
                else "no multi-container pod (one container without GPU) reached success",
            )
        )
    hami_expected = any(
        not p.skipped and p.example.expect == EXPECT_SUCCESS and p.example.wants_mode != "mig" and _wants_vgpu(p)
        for p in state.pods
    )
    if hami_expected or state.hami_pods():
        missing = [p.key for p in state.hami_pods() if p.key not in state.metrics_seen]
        out.append(
            Check(
                "metrics",
                bool(state.metrics_seen) and not missing,
                f"/metrics served per-pod values for {len(state.metrics_seen)} pod(s)"
                if not missing
                else f"no per-pod values on /metrics for {', '.join(missing)}",
            )
        )
        seen = [c for c in state.containers() if isinstance(c, HamiCoreContainer) and c.feedback.seen]
        out.append(
            Check(
                "feedback",
                bool(seen),
                f"the monitor's feedback loop wrote into {len(seen)} shared region(s)"
                if seen
                else "no feedback from the monitor seen in any shared region",
            )
        )
    if state.options.mig_nodes and any(p.example.wants_mig and not p.skipped for p in state.pods):
        ok = bool(state.mig and state.mig.get("mig_uuids"))
        out.append(
            Check(
                "mig",
                ok,
                f"MIG allocation {state.mig['pod']} -> {', '.join(state.mig['mig_uuids'])}"
                if ok and state.mig
                else "no MIG allocation happened",
            )
        )
    x = state.xid
    ok = bool(x and x.unhealthy_at is not None)
    out.append(
        Check(
            "xid",
            ok,
            f"XID {x.xid} on {x.node} GPU {x.index} made it unhealthy"
            if ok and x
            else "no XID made a GPU unhealthy"
            if x is None
            else f"XID {x.xid} injected on {x.node} GPU {x.index} but the GPU never turned unhealthy",
        )
    )
    out.append(
        Check(
            "components",
            not state.component_failed and not state.problems,
            "every component started and stopped cleanly"
            if not state.problems
            else "; ".join(p.splitlines()[0] for p in state.problems),
        )
    )
    return out


def _ctr_wants_vgpu(c: dict[str, Any]) -> bool:
    limits = (c.get("resources") or {}).get("limits") or {}
    return any(k.startswith("volcano.sh/vgpu-") for k in limits)


def _wants_vgpu(p: PodRecord) -> bool:
    return any(_ctr_wants_vgpu(c) for c in (p.example.manifest.get("spec") or {}).get("containers") or [])


def _has_plain_container(p: PodRecord) -> bool:
    """A pod with at least one vGPU container and one without any vGPU request."""
    ctrs = (p.example.manifest.get("spec") or {}).get("containers") or []
    return any(_ctr_wants_vgpu(c) for c in ctrs) and any(not _ctr_wants_vgpu(c) for c in ctrs)


def exit_code(state: DemoState, results: list[Check]) -> int:
    if state.component_failed or state.problems:
        return EXIT_COMPONENT
    if state.interrupted:
        return EXIT_INTERRUPTED if state.options.duration is not None else EXIT_OK
    return EXIT_OK if all(c.ok for c in results) else EXIT_CHECKS


# -------------------------------------------------------------------- summary


def summary_lines(state: DemoState, results: list[Check], printer: Printer) -> list[str]:
    p = printer.paint
    out = ["", p("Summary", "bold")]
    for c in results:
        mark = p("PASS", "green") if c.ok else p("FAIL", "red")
        body = textwrap.wrap(f"{c.name:<16} {c.detail}", max(20, printer.width - 8), subsequent_indent=" " * 17)
        out.append(f"  {mark}  {body[0] if body else c.name}")
        out += [" " * 8 + ln for ln in body[1:]]
    per = {}
    for samples in state.samples.values():
        per.update(per_pod(samples))
    if per:
        out += ["", p("Per-pod memory on /metrics (vGPU_device_memory_usage_in_bytes)", "bold")]
        out += fit_table(
            ["POD", "BYTES", ""],
            [[k, f"{int(v)}", human_bytes(v)] for k, v in sorted(per.items())],
            right=(1, 2),
            width=printer.width,
            wrap=(0,),
        )
    return out


def report(state: DemoState, results: list[Check], code: int) -> dict[str, Any]:
    return {
        "volcano_version": state.options.volcano_version,
        "policy": state.options.policy,
        "duration_s": state.options.duration,
        "elapsed_s": round(state.elapsed, 3),
        "interrupted": state.interrupted,
        "workdir": state.workdir,
        "api_server": state.api_url,
        "notes": list(state.options.notes),
        "nodes": state.nodes,
        "pods": [p.summary() for p in state.pods],
        "metrics": {
            n: {"url": state.metrics_urls.get(n, ""), "samples": [s.as_dict() for s in samples]}
            for n, samples in state.samples.items()
        },
        "metrics_per_pod": {k: v for samples in state.samples.values() for k, v in per_pod(samples).items()},
        "metrics_seen": state.metrics_seen,
        "feedback": state.feedback_notes,
        "xid": None if state.xid is None else vars(state.xid),
        "mig": state.mig,
        "events": state.events,
        "checks": [c.as_dict() for c in results],
        "problems": state.problems,
        "exit_code": code,
    }
