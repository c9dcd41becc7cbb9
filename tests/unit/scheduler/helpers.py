"""Builders for scheduler-emulator unit tests (nodes, pods, a core with nodes registered)."""

from __future__ import annotations

from datetime import UTC, datetime

from vgpu.protocol import RegisterRecord, encode_register, encode_reported, keys
from vgpu.sim.scheduler.core import AllocationPlan, SchedulerCore
from vgpu.sim.scheduler.model import ContainerView, PodView, SchedulerConfig

UTC = UTC
T0 = datetime(2026, 8, 20, 2, 0, 0, tzinfo=UTC)
UUIDS = [f"GPU-{i:08x}-6888-5063-1e4d-f2a09cfbf{i:03x}" for i in range(8)]
A100 = "NVIDIA-NVIDIA A100-SXM4-80GB"
ALLOC = {"volcano.sh/vgpu-number": "20", "volcano.sh/vgpu-memory": "163840", "volcano.sh/vgpu-cores": "200"}

NUM, MEM, CORES, PCT = (
    "volcano.sh/vgpu-number",
    "volcano.sh/vgpu-memory",
    "volcano.sh/vgpu-cores",
    "volcano.sh/vgpu-memory-percentage",
)


def register(
    n: int = 2,
    count: int = 10,
    mem: int = 81920,
    typ: str = A100,
    mode: str = "hami-core",
    uuids: list[str] | None = None,
) -> str:
    uuids = uuids or UUIDS
    return encode_register([RegisterRecord(uuids[i], count, mem, typ, True, mode) for i in range(n)])


def node_annotations(n: int = 2, **kw) -> dict[str, str]:
    return {keys.REGISTER: register(n, **kw), keys.HANDSHAKE: encode_reported(T0)}


def ctr(
    name: str = "c",
    number: int | None = None,
    memory: int | None = None,
    cores: int | None = None,
    pct: int | None = None,
    requests: dict[str, str] | None = None,
) -> ContainerView:
    limits = {}
    for key, v in ((NUM, number), (MEM, memory), (CORES, cores), (PCT, pct)):
        if v is not None:
            limits[key] = str(v)
    return ContainerView(name, limits, requests or {})


def pod(
    name: str,
    *containers: ContainerView,
    annotations: dict[str, str] | None = None,
    uid: str | None = None,
    ns: str = "default",
    node: str = "",
    phase: str = "Pending",
) -> PodView:
    return PodView(
        namespace=ns,
        name=name,
        uid=uid or f"uid-{name}",
        annotations=annotations or {},
        containers=tuple(containers) or (ctr(number=1),),
        node_name=node,
        phase=phase,
        scheduler_name="volcano",
    )


def make_core(
    version: str = "master", nodes: dict[str, dict[str, str]] | None = None, now: datetime = T0, **cfg
) -> SchedulerCore:
    core = SchedulerCore(SchedulerConfig(version=version, **cfg))
    for name, ann in (nodes if nodes is not None else {"n1": node_annotations()}).items():
        d = core.node_event(name, ann, ALLOC, now)
        assert d.usable, d.reason
    return core


def place(core: SchedulerCore, p: PodView, now: datetime = T0) -> AllocationPlan:
    """One scheduling session for one pod: Filter + score + Allocate + commit, as the driver does
    when every write succeeds, then the next session opens (docs/scheduler-emulator.md §9.5)."""
    plan = place_in_session(core, p, now)
    core.begin_session()
    return plan


def place_in_session(core: SchedulerCore, p: PodView, now: datetime = T0) -> AllocationPlan:
    """Filter + score + Allocate + commit within the current session."""
    chosen = core.filter_and_score(p, sorted(core.nodes))
    assert chosen.node is not None, chosen.node_reasons
    plan = core.allocate(p, chosen.node, now)
    core.commit(plan)
    return plan


def bound(p: PodView, plan: AllocationPlan) -> PodView:
    """The pod as the API server shows it after the writes and the bind."""
    from dataclasses import replace

    return replace(p, node_name=plan.node, annotations={**p.annotations, **plan.annotations})


def ids(plan: AllocationPlan) -> str:
    return plan.annotations[keys.VGPU_IDS_NEW]
