"""The pure core of the Volcano scheduler emulator: node decode and handshake decisions, the
device ledger, Filter/score/select, Allocate and Release (docs/scheduler-emulator.md §9).

No I/O: the driver (:mod:`vgpu.sim.scheduler`) feeds it nodes and pods as plain data and performs
the writes it asks for. Time comes in as an aware ``datetime``.

Upstream decisions that look like mistakes are reproduced per version (docs/scheduler-emulator.md §9.9).
Where Volcano's behaviour is undefined, the emulator decides as follows (docs/scheduler-emulator.md §9.7; each is also
named where it happens):

* Register ids that are not dense 0..N-1 (a junk segment) make the node unusable with a reason;
  Volcano would walk a nil device.
* A session is one driver cycle (:meth:`SchedulerCore.begin_session` opens the next); a node
  event inside a session rebuilds that node's ledger at once and drops its session double charges.
* The charge of a ``vgpu-number: 0`` container stays with the pod's charges until the pod leaves
  or a node event rebuilds the ledger from the annotations.
* Among equally scored nodes the first by name wins (Volcano picks at random).
* An unparsable lock value makes Allocate fail with the parse error (as Volcano's ``LockNode``);
  an expired lock is replaced (docs/protocol.md §2.4; upstream's ``setNodeLock`` refuses any present key).
* Not emulated: vGPU preemption (S-6), ``GPUExclusiveRules``, scheduler metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from vgpu.config.model import MigGroup
from vgpu.protocol import (
    HANDSHAKE_TIMEOUT,
    ProtocolError,
    decode_pod_devices_as_volcano,
    decode_register_as_volcano,
    encode_deleted,
    encode_requesting,
    keys,
    parse_mig_id_as_volcano,
    scheduler_allocation,
    volcano_handshake_state,
    volcano_requesting_stamp,
)
from vgpu.sim.scheduler.fit import fit_pod, mig_factor, node_order_score, quantity_as_int64
from vgpu.sim.scheduler.model import (
    Charge,
    GpuState,
    MigTypeUsage,
    NodeState,
    PodUsage,
    PodView,
    SchedulerConfig,
)

MASTER_ALLOCATABLE = ("volcano.sh/vgpu-number", "volcano.sh/vgpu-cores", "volcano.sh/vgpu-memory")
"""Hard-coded in Volcano master, not taken from the ConfigMap (docs/protocol.md §2.3)."""

NOT_INITIALIZED = "node not initialized with devicehamivgpu"


@dataclass(frozen=True)
class NodeDecision:
    """Outcome of one node event (``NewGPUDevices``)."""

    usable: bool
    reason: str = ""
    handshake_write: str | None = None
    """A handshake value the scheduler PATCHes now (``Requesting_…`` or ``Deleted_…``)."""


@dataclass
class AllocationPlan:
    """A live-ledger allocation waiting for its writes (lock, annotations, bind)."""

    pod: PodView
    node: str
    annotations: dict[str, str]
    """The six keys; empty for a pod without vGPU containers."""
    charges: tuple[Charge, ...]


class AllocationError(Exception):
    """Allocate failed on the chosen node; the pod stays pending."""


@dataclass
class FilterOutcome:
    node: str | None
    score: int = 0
    node_reasons: dict[str, str] = field(default_factory=dict)
    scores: dict[str, int] = field(default_factory=dict)


class SchedulerCore:
    """Node states + ledger of one emulated scheduler."""

    def __init__(self, config: SchedulerConfig):
        self.config = config
        self.switches = config.switches
        self.nodes: dict[str, NodeState] = {}
        self.node_reasons: dict[str, str] = {}
        self.pods: dict[str, PodView] = {}
        self._in_flight: dict[str, AllocationPlan] = {}
        """Pods allocated by us whose binding is not visible in a pod list yet, by UID."""
        self._session_extra: list[tuple[str, tuple[Charge, ...]]] = []
        """Second charges of pods allocated in this session (v1.12/v1.13, case 7)."""
        self._unrecorded_slots: list[AllocationPlan] = []
        """Plans of this session whose MIG slots the ledger does not know yet (v1.14+, case 8)."""
        self.problems: list[str] = []
        """What Volcano would have logged as errors (bad PodDevices, unknown MIG ids, …)."""

    # ---- node events ---------------------------------------------------------------------

    def handshake_decision(self, value: str, now: datetime) -> tuple[bool, str | None]:
        """docs/protocol.md §2.2 state machine: ``(usable, value to PATCH or None)``."""
        local = now.astimezone(self.config.tz)
        state = volcano_handshake_state(value)
        if state == "Requesting":
            if now > volcano_requesting_stamp(value) + HANDSHAKE_TIMEOUT:
                return False, encode_deleted(local)
            return True, None
        if state == "Deleted":
            return False, None
        return True, encode_requesting(local)

    def node_event(
        self, name: str, annotations: Mapping[str, str], allocatable: Mapping[str, str], now: datetime
    ) -> NodeDecision:
        """``NewGPUDevices`` on a node add/update: rebuild this node's devices and ledger."""
        decision = self._decode_node(name, annotations, allocatable, now)
        if not decision.usable:
            self.nodes.pop(name, None)
            self.node_reasons[name] = decision.reason
        return decision

    def _decode_node(
        self, name: str, annotations: Mapping[str, str], allocatable: Mapping[str, str], now: datetime
    ) -> NodeDecision:
        sw = self.switches
        register = annotations.get(keys.REGISTER)
        if register is None:
            return NodeDecision(False, f"{NOT_INITIALIZED}: no {keys.REGISTER} annotation")
        if sw.handshake:
            if keys.HANDSHAKE not in annotations:
                return NodeDecision(False, f"{NOT_INITIALIZED}: no {keys.HANDSHAKE} annotation")
        else:
            for res in MASTER_ALLOCATABLE:
                v = quantity_as_int64(allocatable.get(res))
                if v is None or v <= 0:
                    return NodeDecision(
                        False, f"{NOT_INITIALIZED}: allocatable {res} is {allocatable.get(res, 'absent')} (needs > 0)"
                    )
        try:
            view = decode_register_as_volcano(register, min_fields=sw.min_register_fields)
        except ProtocolError as exc:
            return NodeDecision(False, f"{NOT_INITIALIZED}: {exc}")
        if not view.devices:
            return NodeDecision(False, f"{NOT_INITIALIZED}: the register annotation has no devices")
        ids = [d.id for d in view.devices]
        if ids != list(range(len(ids))):
            # Volcano walks indices 0..N-1 of a map keyed by segment position: a gap is a nil device.
            return NodeDecision(
                False,
                f"{NOT_INITIALIZED}: device ids {ids} are not dense 0..{len(ids) - 1} "
                "(Volcano would dereference a nil GPU)",
            )
        write = None
        if sw.handshake:
            usable, write = self.handshake_decision(annotations[keys.HANDSHAKE], now)
            if not usable:
                reason = "handshake expired" if write else "handshake Deleted"
                return NodeDecision(False, f"{NOT_INITIALIZED}: {reason}", write)
        gpus = []
        node_mode = keys.MODE_HAMI_CORE
        for d in view.devices:
            mode = keys.MODE_HAMI_CORE
            template: tuple[MigGroup, ...] = ()
            if sw.mig and d.mode == keys.MODE_MIG:
                entry = next((e for e in self.config.known_mig_geometries if any(m in d.type for m in e.models)), None)
                if entry is None:
                    self.problems.append(
                        f"node {name} GPU {d.id}: mig type not found: extract mig geometry "
                        "error and fall back to hamicore mode"
                    )
                else:
                    mode, template = keys.MODE_MIG, entry.groups
            node_mode = mode
            gpus.append(
                GpuState(
                    id=d.id,
                    uuid=d.uuid,
                    number=d.number,
                    memory=d.memory,
                    type=d.type,
                    health=d.health,
                    mig_template=template,
                )
            )
        # One sharing handler per node: the last record's effective mode applies to every GPU
        # (case 9). A hami-core GPU under a mig node has no geometry, so nothing fits on it.
        for g in gpus:
            g.mode = node_mode
        state = NodeState(name, node_mode, gpus)
        self.nodes[name] = state
        self._session_extra = [e for e in self._session_extra if e[0] != name]  # rebuilt from the cache
        self.node_reasons.pop(name, None)
        for pod in self.pods.values():
            if self._holds(pod, name):
                self._ledger_add(state, pod)
        for plan in self._in_flight.values():
            if plan.node == name and plan.pod.uid not in state.accounted:
                for ch in plan.charges:
                    gpu = state.gpu(ch.gpu_id)
                    if gpu is not None:
                        gpu.used_num += 1
                        gpu.used_mem += ch.mem
                        gpu.used_core += ch.cores
                self._record(state, plan)
        return NodeDecision(True, "", write)

    def node_deleted(self, name: str) -> None:
        self.nodes.pop(name, None)
        self.node_reasons.pop(name, None)

    # ---- ledger --------------------------------------------------------------------------

    @staticmethod
    def _holds(pod: PodView, node: str) -> bool:
        return pod.node_name == node and not pod.terminated and keys.VGPU_IDS_NEW in pod.annotations

    def _ledger_add(self, node: NodeState, pod: PodView) -> None:
        """``AddResource``: charge every ``vgpu-ids-new`` device to the GPU whose UUID is a
        substring of its id; MIG ids charge the instance memory. Idempotent per pod UID."""
        if pod.uid in node.accounted or keys.VGPU_IDS_NEW not in pod.annotations:
            return
        segments, problems = decode_pod_devices_as_volcano(
            pod.annotations[keys.VGPU_IDS_NEW], strict_devices=self.switches.strict_pod_devices
        )
        self.problems.extend(f"pod {pod.key}: {p}" for p in problems)
        charges = []
        factor = mig_factor(self.config)
        first_only = self.switches.rebuild_first_container_per_gpu
        seen: set[int] = set()
        for seg in segments:
            for dev in seg:
                gpu = next((g for g in node.gpus if g.uuid in dev.id), None)
                if gpu is None:
                    continue
                if first_only and gpu.id in seen:
                    continue  # the pod is already in this GPU's PodMap: not counted again (case 4)
                if gpu.mode == keys.MODE_MIG:
                    slot = parse_mig_id_as_volcano(dev.id)
                    if slot is None:
                        self.problems.append(f"pod {pod.key}: MIG id {dev.id!r}: invalid format")
                        continue
                    mem = self._mig_slot_add(gpu, slot.group, slot.position)
                    if mem is None:
                        self.problems.append(
                            f"pod {pod.key}: MIG position {slot.position} is outside {slot.group} on {gpu.uuid}"
                        )
                        continue
                    ch = Charge(gpu.id, mem // factor, dev.usedcores, slot.group, slot.position)
                else:
                    ch = Charge(gpu.id, dev.usedmem, dev.usedcores)
                self._charge(gpu, ch, pod.uid, pod.podgroup_key, sign=1)
                seen.add(gpu.id)
                charges.append(ch)
        node.accounted[pod.uid] = tuple(charges)

    @staticmethod
    def _mig_slot_add(gpu: GpuState, group_name: str, position: int) -> int | None:
        """``addMigUsed``: select the group and record the slot; returns the instance memory,
        0 for an unknown group (Volcano then charges no memory), ``None`` for a position outside
        the group."""
        for gi, group in enumerate(gpu.mig_template):
            if group.group != group_name:
                continue
            gpu.mig_usage.index = gi
            base = 0
            for t in group.geometries:
                if position < base + t.count:
                    slot = position - base
                    for u in gpu.mig_usage.usage_list:
                        if u.name == t.name:
                            if slot not in u.used_index:
                                u.used_index.append(slot)
                                u.used_index.sort()
                            return u.memory
                    gpu.mig_usage.usage_list.append(MigTypeUsage(t.name, t.memory_mib, [slot]))
                    return t.memory_mib
                base += t.count
            return None
        return 0

    @staticmethod
    def _charge(gpu: GpuState, ch: Charge, uid: str, pg_key: str, sign: int) -> None:
        gpu.used_num += sign
        gpu.used_mem += sign * ch.mem
        gpu.used_core += sign * ch.cores
        u = gpu.pod_map.get(uid)
        if sign > 0:
            if u is None:
                u = gpu.pod_map[uid] = PodUsage(podgroup_key=pg_key)
            u.used_mem += ch.mem
            u.used_core += ch.cores
        elif u is not None:
            u.used_mem -= ch.mem
            u.used_core -= ch.cores
            if u.used_mem <= 0 and u.used_core <= 0:
                del gpu.pod_map[uid]

    def _ledger_sub(self, node: NodeState, uid: str) -> None:
        """``SubResource``: give back exactly what was charged; the MIG group choice stays."""
        for ch in node.accounted.pop(uid, ()):
            gpu = node.gpu(ch.gpu_id)
            if gpu is None:
                continue
            self._charge(gpu, ch, uid, "", sign=-1)
            gpu.pod_map.pop(uid, None)
            if ch.mig_group is not None:
                self._sub_mig_used(gpu, ch)

    @staticmethod
    def _sub_mig_used(gpu: GpuState, ch: Charge) -> None:
        for group in gpu.mig_template:
            if group.group != ch.mig_group:
                continue
            base = 0
            for t in group.geometries:
                if ch.mig_position < base + t.count:
                    slot = ch.mig_position - base
                    for u in list(gpu.mig_usage.usage_list):
                        if u.name == t.name:
                            if slot in u.used_index:
                                u.used_index.remove(slot)
                            if not u.used_index:
                                gpu.mig_usage.usage_list.remove(u)
                            return
                    return
                base += t.count

    def sync_pods(self, pods: Iterable[PodView]) -> None:
        """Apply pod adds, updates and deletes to the ledger (the cache's Add/SubResource)."""
        current = {p.uid: p for p in pods}
        for uid, p in current.items():
            if p.node_name and uid in self._in_flight:
                del self._in_flight[uid]
        for node in self.nodes.values():
            for uid in list(node.accounted):
                pod = current.get(uid)
                if uid in self._in_flight and pod is not None and not pod.terminated:
                    continue
                if pod is None or not self._holds(pod, node.name):
                    self._ledger_sub(node, uid)
        for p in current.values():
            pod_node = self.nodes.get(p.node_name)
            if pod_node is not None and self._holds(p, pod_node.name) and p.uid not in pod_node.accounted:
                self._ledger_add(pod_node, p)
        for uid in [u for u in self._in_flight if u not in current]:
            del self._in_flight[uid]
        self.pods = current

    def queue_resources(self, pod: PodView) -> dict[str, float]:
        """``AddQueueResource``: what the pod's devices on its node count against its queue — the
        memory and cores of every ``vgpu-ids-new`` device on a known GPU, ×1000 (milli-units),
        from v1.13 (S-3). Before v1.13 the queue does not see them (empty dict)."""
        node = self.nodes.get(pod.node_name)
        if not self.switches.queue_scalars or node is None or keys.VGPU_IDS_NEW not in pod.annotations:
            return {}
        segments, _ = decode_pod_devices_as_volcano(
            pod.annotations[keys.VGPU_IDS_NEW], strict_devices=self.switches.strict_pod_devices
        )
        mem_name, core_name = self.config.memory_name, self.config.cores_name
        out = {mem_name: 0.0, core_name: 0.0}
        for seg in segments:
            for dev in seg:
                for gpu in node.gpus:
                    if gpu.uuid in dev.id:
                        out[mem_name] += dev.usedmem * 1000
                        out[core_name] += dev.usedcores * 1000
        return out

    # ---- scheduling ----------------------------------------------------------------------

    def filter_and_score(self, pod: PodView, candidate_nodes: Iterable[str]) -> FilterOutcome:
        """Filter on a snapshot of every node, score with NodeOrderFn, pick the best.

        Ties go to the node name that sorts first (Volcano picks at random among the best)."""
        cfg, sw = self.config, self.switches
        order_policy = cfg.policy if sw.policy_drives_order else ""
        out = FilterOutcome(None)
        best: tuple[int, str] | None = None
        for name in sorted(candidate_nodes):
            node = self.nodes.get(name)
            if node is None:
                if self._needs_devices(pod):
                    out.node_reasons[name] = self.node_reasons.get(name, NOT_INITIALIZED)
                    continue
                score = 0
            else:
                fit = fit_pod(pod, node.snapshot(), cfg, order_policy=order_policy, score_policy=cfg.policy)
                if not fit.ok:
                    out.node_reasons[name] = fit.error
                    continue
                score = node_order_score(fit.score, cfg)
            out.scores[name] = score
            if best is None or score > best[0]:
                best = (score, name)
        if best is not None:
            out.node, out.score = best[1], best[0]
        return out

    def _needs_devices(self, pod: PodView) -> bool:
        count_name, memory_name, _ = self.config.effective_names
        return any(count_name in c.limits or memory_name in c.limits for c in pod.containers)

    def allocate(self, pod: PodView, node_name: str, now: datetime) -> AllocationPlan:
        """Allocate: re-fit on the live ledger (≤ v1.14 with policy ``""``), build the six keys.

        Raises :class:`AllocationError`; the live increments of a failed fit stay before v1.15
        (no rollback), as in Volcano."""
        if not self._needs_devices(pod):
            return AllocationPlan(pod, node_name, {}, ())
        node = self.nodes.get(node_name)
        if node is None:
            raise AllocationError(self.node_reasons.get(node_name, NOT_INITIALIZED))
        cfg = self.config
        policy = cfg.policy if self.switches.policy_drives_order else ""
        fit = fit_pod(pod, node, cfg, order_policy=policy, score_policy=policy)
        if not fit.ok:
            raise AllocationError(fit.error)
        try:
            annotations = scheduler_allocation(node_name, fit.devices, now.timestamp())
        except (ProtocolError, ValueError) as exc:
            self._undo(node, fit.charges)
            raise AllocationError(f"cannot encode the allocation: {exc}") from exc
        return AllocationPlan(pod, node_name, annotations, fit.charges)

    def commit(self, plan: AllocationPlan) -> None:
        """Before the writes (as Volcano's ``addToPodMap``): add the pod to ``PodMap`` — and record
        its MIG slots, so a later pod does not get the same position before the next node event.
        The counters were already charged by the live fit."""
        node = self.nodes.get(plan.node)
        if node is None or not plan.charges:
            return
        sw = self.switches
        self._record(node, plan, mig_slots=sw.mig_slot_recorded_in_session)
        if not sw.mig_slot_recorded_in_session:
            self._unrecorded_slots.append(plan)  # v1.14+: recorded at the next session (case 8)
        if sw.session_double_count:
            # v1.12/v1.13: the cache's add charges the pod a second time in this session (case 7).
            extra = [ch for ch in plan.charges if ch.device]
            if sw.rebuild_first_container_per_gpu:
                firsts: dict[int, Charge] = {}
                for ch in extra:
                    firsts.setdefault(ch.gpu_id, ch)
                extra = list(firsts.values())
            self._session_extra.append((plan.node, tuple(extra)))
            self._apply(node, extra, sign=1)
        self._in_flight[plan.pod.uid] = plan

    def begin_session(self) -> None:
        """A new scheduling session opens from the cache (docs/scheduler-emulator.md §9.5): the
        double charges of the last session go (case 7) and the MIG slots allocated in it are
        recorded (case 8)."""
        for node_name, extra in self._session_extra:
            node = self.nodes.get(node_name)
            if node is not None:
                self._apply(node, extra, sign=-1)
        self._session_extra.clear()
        for plan in self._unrecorded_slots:
            node = self.nodes.get(plan.node)
            if node is None or node.accounted.get(plan.pod.uid) is not plan.charges:
                continue  # released, or the ledger was rebuilt (which records the slots)
            for ch in plan.charges:
                gpu = node.gpu(ch.gpu_id)
                if gpu is not None and ch.mig_group is not None:
                    self._mig_slot_add(gpu, ch.mig_group, ch.mig_position)
        self._unrecorded_slots.clear()

    @staticmethod
    def _apply(node: NodeState, charges: Iterable[Charge], sign: int) -> None:
        for ch in charges:
            gpu = node.gpu(ch.gpu_id)
            if gpu is not None:
                gpu.used_num += sign
                gpu.used_mem += sign * ch.mem
                gpu.used_core += sign * ch.cores

    def _record(self, node: NodeState, plan: AllocationPlan, *, mig_slots: bool = True) -> None:
        for ch in plan.charges:
            gpu = node.gpu(ch.gpu_id)
            if gpu is None or not ch.device:
                continue
            u = gpu.pod_map.setdefault(plan.pod.uid, PodUsage(podgroup_key=plan.pod.podgroup_key))
            u.used_mem += ch.mem
            u.used_core += ch.cores
            if mig_slots and ch.mig_group is not None:
                self._mig_slot_add(gpu, ch.mig_group, ch.mig_position)
        node.accounted[plan.pod.uid] = plan.charges

    def release(self, plan: AllocationPlan) -> None:
        """Release (deallocation before bind, e.g. a failed write): from v1.15 the devices are
        given back; before v1.15 it is a no-op, so the live counters stay charged until the next
        node event rebuilds the ledger. Nothing is removed on the API server; on master the task
        copy loses the six keys, which the emulator models by never reusing ``plan.annotations``."""
        self._in_flight.pop(plan.pod.uid, None)
        node = self.nodes.get(plan.node)
        if node is None:
            return
        committed = node.accounted.pop(plan.pod.uid, None) is not None
        if not self.switches.release_decrements:
            return
        self._undo(node, plan.charges)
        if committed:
            for ch in plan.charges:
                gpu = node.gpu(ch.gpu_id)
                if gpu is None:
                    continue
                gpu.pod_map.pop(plan.pod.uid, None)
                if ch.mig_group is not None:
                    self._sub_mig_used(gpu, ch)

    @classmethod
    def _undo(cls, node: NodeState, charges: Iterable[Charge]) -> None:
        cls._apply(node, charges, sign=-1)
