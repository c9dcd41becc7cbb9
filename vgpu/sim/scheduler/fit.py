"""Fit, score and MIG pick of the Volcano vGPU scheduler (docs/protocol.md §4, docs/scheduler-emulator.md §9.2–§9.4).

Pure functions over :mod:`vgpu.sim.scheduler.model` states. ``fit_pod`` mutates the node it is
given (as Volcano's does): Filter passes a snapshot, Allocate passes the live ledger.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation

from kubernetes.utils import parse_quantity

from vgpu.config.model import MigGroup
from vgpu.protocol import ContainerDevice, MigSlot, keys
from vgpu.sim.scheduler.model import (
    Charge,
    ContainerRequest,
    GpuState,
    NodeState,
    PodView,
    SchedulerConfig,
)
from vgpu.sim.scheduler.versions import VersionSwitches

PCT_UNSET = 101
_U64 = 2**64


def quantity_as_int64(text: str | None) -> int | None:
    """``resource.Quantity.AsInt64()``: the integer value, ``None`` when not an exact int64."""
    if text is None:
        return None
    try:
        q = Decimal(parse_quantity(text))
    except (ValueError, InvalidOperation, TypeError):
        return None
    if q != q.to_integral_value() or not -(2**63) <= q <= 2**63 - 1:
        return None
    return int(q)


def _first(limits: Mapping[str, str], requests: Mapping[str, str], name: str) -> int | None:
    """``limits[name]``, else ``requests[name]``; ``None`` if neither is present or not an int64."""
    if not name:
        return None
    if name in limits:
        return quantity_as_int64(limits[name])
    if name in requests:
        return quantity_as_int64(requests[name])
    return None


def pod_requests(pod: PodView, cfg: SchedulerConfig) -> list[ContainerRequest]:
    """One request per vGPU container, in spec order (docs/protocol.md §4 steps 1–6); init containers never count."""
    out = []
    pct_name = cfg.effective_percentage_name
    count_name, memory_name, cores_name = cfg.effective_names
    for c in pod.containers:
        has_count = count_name in c.limits
        if not has_count and memory_name not in c.limits:
            continue
        nums = (quantity_as_int64(c.limits[count_name]) or 0) if has_count else 1
        memreq = _first(c.limits, c.requests, memory_name) or 0
        memreq = memreq % _U64  # uint conversion
        pct = PCT_UNSET
        p = _first(c.limits, c.requests, pct_name)
        if p is not None:
            pct = p
        if pct == PCT_UNSET and memreq == 0:
            pct = 100
        cores = (_first(c.limits, c.requests, cores_name) or 0) % _U64
        out.append(ContainerRequest(nums=nums, memreq=memreq, mem_percentage=pct, coresreq=cores))
    return out


def memreq_for_card(req: ContainerRequest, gpu: GpuState, sw: VersionSwitches) -> int:
    """docs/protocol.md §4 step 7 and docs/scheduler-emulator.md §9.9 cases 1 and 3: the memory one
    card is asked for.  v1.14+: a set percentage wins, per card.  ≤ v1.13: the percentage is read only
    while the memory request is 0 (the caller then keeps the result as the request for later cards)."""
    if req.mem_percentage == PCT_UNSET:
        return req.memreq
    if not sw.percentage_overrides_memory and req.memreq != 0:
        return req.memreq  # ≤ v1.13: the memory request wins (case 1)
    return percentage_of(req.mem_percentage, gpu, sw)


def percentage_of(pct: int, gpu: GpuState, sw: VersionSwitches) -> int:
    """``pct`` % of the card's memory with the version's formula."""
    if sw.float_percentage:
        return int(float(gpu.memory) * pct / 100) % _U64
    # ≤ v1.13: Memory × uint(pct/100) — 0 for any pct below 100 (S-1)
    return (gpu.memory * (int(pct / 100) % _U64)) % _U64


def gputype_ok(annotations: Mapping[str, str], card_type: str, sw: VersionSwitches) -> bool:
    """``checkGPUtype``: case-insensitive substrings; ``use-gputype`` wins over ``nouse-gputype``."""
    card = card_type.upper()
    if keys.USE_GPUTYPE in annotations:
        return any(e.upper() in card for e in annotations[keys.USE_GPUTYPE].split(","))
    if keys.NOUSE_GPUTYPE in annotations:
        nouse = annotations[keys.NOUSE_GPUTYPE]
        if "," not in nouse and sw.nouse_single_value_bug:
            return True  # ≤ v1.11 (S-7)
        return not any(e.upper() in card for e in nouse.split(","))
    return True


def _uuid_list(annotations: Mapping[str, str], key: str) -> frozenset[str] | None:
    if key not in annotations:
        return None
    entries = frozenset(e.strip() for e in annotations[key].split(",") if e.strip())
    return entries or None


def uuid_filter(annotations: Mapping[str, str]) -> tuple[frozenset[str] | None, frozenset[str] | None]:
    """The master UUID allow- and denylists (trimmed entries, exact match)."""
    return _uuid_list(annotations, keys.USE_GPUUUID), _uuid_list(annotations, keys.NOUSE_GPUUUID)


def uuid_passes(uuid: str, allow: frozenset[str] | None, deny: frozenset[str] | None) -> bool:
    if deny is not None and uuid in deny:
        return False  # the denylist wins
    return allow is None or uuid in allow


def gpu_score(policy: str, gpu: GpuState, sw: VersionSwitches) -> float:
    """``GPUScore``, evaluated after the ledger increment (docs/scheduler-emulator.md §9.3)."""
    if policy == "binpack":
        return 100.0 * gpu.used_mem / gpu.memory if gpu.memory else 0.0
    if policy == "spread":
        return 100.0 if gpu.used_num == sw.spread_score_used_num else 0.0
    return 0.0


def node_order_score(score: float, cfg: SchedulerConfig) -> int:
    """NodeOrderFn: ``floor(score + 0.5) × weight`` if weight > 0 (v1.13+), else 0."""
    if not cfg.switches.node_order_uses_score or cfg.weight <= 0:
        return 0
    return int(math.floor(score + 0.5)) * cfg.weight


def visit_order(gpus: list[GpuState], policy: str) -> list[GpuState]:
    """binpack: UsedMem descending; spread: UsedNum ascending; unset: index descending.
    Ties go to the lower index."""
    if policy == "binpack":
        return sorted(gpus, key=lambda g: (-g.used_mem, g.id))
    if policy == "spread":
        return sorted(gpus, key=lambda g: (g.used_num, g.id))
    return sorted(gpus, key=lambda g: -g.id)


def _mig_position(group: MigGroup, type_index: int, count: int, used: list[int]) -> int:
    """Σ counts of the types before it (config order) + the first free slot of that type."""
    base = sum(t.count for t in group.geometries[:type_index])
    for i in range(count):
        if i not in used:
            return base + i
    return base


def pick_from_group(group: MigGroup, usage: list, request: int) -> tuple[int, int] | None:
    """docs/scheduler-emulator.md §9.4 steps 3–4: ``(position, instance memory)`` or ``None``."""
    types = sorted(enumerate(group.geometries), key=lambda t: t[1].memory_mib)
    for idx, t in types:
        if not usage and t.memory_mib >= request:
            return _mig_position(group, idx, t.count, []), t.memory_mib
        for u in usage:
            if u.name == t.name and t.count - len(u.used_index) > 0 and t.memory_mib >= request:
                return _mig_position(group, idx, t.count, u.used_index), t.memory_mib
    return None


def mig_factor(cfg: SchedulerConfig) -> int:
    """The factor applied to MIG requests and charges (v1.15+, and only when > 1)."""
    f = cfg.gpu_memory_factor
    return f if cfg.switches.factor_in_mig_pick and f > 1 else 1


def try_add_pod_mig(gpu: GpuState, memreq: int, coresreq: int, cfg: SchedulerConfig) -> tuple[MigSlot, int] | None:
    """``TryAddPod`` of the MIG sharing handler (docs/scheduler-emulator.md §9.4).

    Records neither the group nor the slot (so two containers of one pod can get the same
    position, or two different groups of one GPU)."""
    factor = mig_factor(cfg)
    request = memreq * factor
    groups = gpu.mig_template
    if gpu.mig_usage.index >= 0:
        candidates = [(gpu.mig_usage.index, groups[gpu.mig_usage.index], gpu.mig_usage.usage_list)]
    else:
        candidates = [(i, g, []) for i, g in enumerate(groups)]
    for _gi, group, usage in candidates:
        picked = pick_from_group(group, usage, request)
        if picked is None:
            continue
        position, inst_mem = picked
        # The group is not recorded here (only a ledger add records it): a later container of the
        # same pod tries every group again and may take another one (docs/scheduler-emulator.md §9.9).
        charged = inst_mem // factor
        gpu.used_num += 1
        gpu.used_mem += charged
        gpu.used_core += coresreq
        return MigSlot(group.group, position), charged
    return None


def podgroup_conflict(gpu: GpuState, pod: PodView) -> bool:
    """``vgpu-podgroup-policy: spread``: another pod of the same PodGroup holds mem or cores here."""
    if pod.annotations.get(keys.PODGROUP_POLICY) != keys.PODGROUP_POLICY_SPREAD:
        return False
    pg = pod.podgroup_key
    if not pg:
        return False
    return any(
        uid != pod.uid and u.podgroup_key == pg and (u.used_mem > 0 or u.used_core > 0)
        for uid, u in gpu.pod_map.items()
    )


@dataclass
class FitResult:
    ok: bool
    devices: tuple[tuple[ContainerDevice, ...], ...] = ()
    score: float = 0.0
    error: str = ""
    charges: tuple[Charge, ...] = ()
    """What the fit added to the ledger it ran on (for Release)."""
    has_request: bool = True


def fit_pod(pod: PodView, node: NodeState, cfg: SchedulerConfig, *, order_policy: str, score_policy: str) -> FitResult:
    """``checkNodeGPUSharingPredicateAndScore`` on ``node`` (mutated: pass a snapshot for Filter)."""
    sw = cfg.switches
    reqs = pod_requests(pod, cfg)
    if not reqs:
        return FitResult(True, has_request=False)
    ann = pod.annotations
    if sw.mig and keys.VGPU_MODE in ann and ann[keys.VGPU_MODE] != node.mode:
        return FitResult(
            False, error=f"pod required sharing mode {ann[keys.VGPU_MODE]} is not the same as the node mode {node.mode}"
        )
    allow = deny = None
    if sw.uuid_filter:
        allow, deny = uuid_filter(ann)
        if (allow is not None or deny is not None) and not any(uuid_passes(g.uuid, allow, deny) for g in node.gpus):
            return FitResult(
                False,
                error=(
                    f"no GPU matches UUID constraints {keys.USE_GPUUUID}={json.dumps(ann.get(keys.USE_GPUUUID, ''))}, "
                    f"{keys.NOUSE_GPUUUID}={json.dumps(ann.get(keys.NOUSE_GPUUUID, ''))} on node {node.name}"
                ),
            )
    score = 0.0
    containers: list[tuple[ContainerDevice, ...]] = []
    all_charges: list[Charge] = []
    for req in reqs:
        if req.nums > len(node.gpus):
            return FitResult(False, error=f"no enough gpu cards on node {node.name}", charges=tuple(all_charges))
        nums = req.nums
        zero = nums == 0
        devs: list[ContainerDevice] = []
        charges: list[Charge] = []
        visit = nums > 0 or sw.zero_count_charged  # v1.12+: a vgpu-number 0 container is still charged (case 5)
        for gpu in visit_order(node.gpus, order_policy) if visit else ():
            if sw.uuid_filter and not uuid_passes(gpu.uuid, allow, deny):
                continue
            if gpu.number <= gpu.used_num:
                continue
            if sw.podgroup_spread and podgroup_conflict(gpu, pod):
                continue
            memreq = memreq_for_card(req, gpu, sw)
            if sw.percentage_reused_across_cards and req.mem_percentage != PCT_UNSET and req.memreq == 0:
                req = replace(req, memreq=memreq)  # ≤ v1.13: later cards get this card's memory (case 3)
            free = gpu.memory - gpu.used_mem
            if not sw.signed_memory_compare:
                free %= _U64  # v1.9: unsigned underflow (S-2)
            if free < memreq:
                continue
            if 100 - gpu.used_core < req.coresreq:
                continue
            if req.coresreq == 100 and gpu.used_num > 0:
                continue
            if gpu.used_core == 100 and req.coresreq == 0:
                continue
            if keys.DEVICE_TYPE not in gpu.type or not gputype_ok(ann, gpu.type, sw):
                continue
            if gpu.mode == keys.MODE_MIG:
                picked = try_add_pod_mig(gpu, memreq, req.coresreq, cfg)
                if picked is None:
                    continue
                slot, charged = picked
                if zero:
                    charges.append(Charge(gpu.id, charged, req.coresreq, device=False))
                    break
                devs.append(ContainerDevice(gpu.uuid, memreq, req.coresreq, slot))
                charges.append(Charge(gpu.id, charged, req.coresreq, slot.group, slot.position))
            else:
                gpu.used_num += 1
                gpu.used_mem += memreq
                gpu.used_core += req.coresreq
                if zero:
                    charges.append(Charge(gpu.id, memreq, req.coresreq, device=False))
                    break
                devs.append(ContainerDevice(gpu.uuid, memreq, req.coresreq))
                charges.append(Charge(gpu.id, memreq, req.coresreq))
            score += gpu_score(score_policy, gpu, sw)
            nums -= 1
            if nums == 0:
                break
        if nums > 0:
            if sw.rollback:
                for ch in charges:
                    g = node.gpu(ch.gpu_id)
                    assert g is not None
                    g.used_num -= 1
                    g.used_mem -= ch.mem
                    g.used_core -= ch.cores
                charges = []
            return FitResult(False, error="not enough gpu fitted on this node", charges=tuple(all_charges + charges))
        all_charges.extend(charges)
        containers.append(tuple(devs))
    return FitResult(True, tuple(containers), score, charges=tuple(all_charges))
