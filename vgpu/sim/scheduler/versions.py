"""Per-version behaviour switches of the Volcano vGPU scheduler (docs/scheduler-emulator.md §9.6).

Every version-dependent branch of the emulator reads one named switch from here, so the table of
docs/scheduler-emulator.md §9.6 and the code can be compared line by line (a test does).
"case N" below is case N of docs/scheduler-emulator.md §9.9, the upstream decisions reproduced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VERSIONS = ("v1.9", "v1.10", "v1.11", "v1.12", "v1.13", "v1.14", "v1.15", "master")
_MINOR = {name: i for i, name in enumerate(VERSIONS)}


@dataclass(frozen=True)
class VersionSwitches:
    name: str
    min_register_fields: int
    """5 before v1.12 (extra fields ignored), 6 from v1.12."""
    handshake: bool
    """v1.9–v1.15 use the node handshake; master uses the allocatable > 0 rule instead."""
    annotations_on_binding: bool
    """master carries the six pod keys on the Binding; older versions PATCH them before binding."""
    node_lock_honoured: bool
    """``NodeLockEnable`` works from v1.10 (v1.9 never propagated the flag)."""
    signed_memory_compare: bool
    """v1.9 compares ``Memory − UsedMem`` as unsigned and can underflow (S-2)."""
    float_percentage: bool
    """v1.14+: ``uint(float64(Memory) × pct / 100)``; before: ``Memory × uint(pct/100)`` (S-1)."""
    configmap_resource_names: bool
    """v1.13+ read the four resource names from the ConfigMap; v1.9–v1.12 always read the built-in
    ``volcano.sh/vgpu-*`` names, whatever the ConfigMap says (case 2)."""
    percentage_name_without_configmap: bool
    """≤ v1.12 read the default percentage resource name (ConfigMap or not); v1.13+ use an empty
    name when the ConfigMap is absent, so the percentage is never read."""
    percentage_overrides_memory: bool
    """v1.14+: a set percentage wins over ``vgpu-memory``; ≤ v1.13 it is read only when the memory
    request is 0 (case 1)."""
    percentage_reused_across_cards: bool
    """≤ v1.13: the memory worked out from the percentage on the first card visited becomes the
    container's request for every later card (case 3); v1.14+ work it out per card."""
    rebuild_first_container_per_gpu: bool
    """v1.12, v1.15, master: the ledger rebuild charges a pod once per GPU — only its first
    container there — so a second container on the same GPU is not counted (case 4)."""
    zero_count_charged: bool
    """v1.12+: a ``vgpu-number: 0`` container is still charged to the first GPU that fits, though it
    gets no device (case 5)."""
    session_double_count: bool
    """v1.12, v1.13: a pod allocated in a session is charged twice in that session's ledger (the live
    fit and the cache's add), so later pods of the session see it double (case 7)."""
    mig_slot_recorded_in_session: bool
    """≤ v1.13 (through the double add): an allocated MIG slot is recorded within the session;
    v1.14+ record it only at the next session, so two pods of one session share a slot (case 8)."""
    nouse_single_value_bug: bool
    """≤ v1.11: a single-value ``nouse-gputype`` passes the card (S-7)."""
    mig: bool
    """v1.12+: ``vgpu-mode`` filter and dynamic MIG."""
    factor_in_mig_pick: bool
    """v1.15+: the MIG request and charge are scaled by gpuMemoryFactor."""
    policy_drives_order: bool
    """v1.15+: the SchedulePolicy orders devices in Filter and Allocate (S-5)."""
    spread_score_used_num: int
    """Spread gives 100 when ``UsedNum`` equals this after the increment: 1 (≤ v1.14) or 0 (S-8)."""
    node_order_uses_score: bool
    """v1.13+: NodeOrderFn returns ``floor(score + 0.5) × weight``; before it returns 0."""
    queue_scalars: bool
    """v1.13+: vgpu-memory/cores count against the queue as scalars ×1000 (milli-units) (S-3)."""
    podgroup_spread: bool
    """v1.15+: ``vgpu-podgroup-policy: spread`` (S-4)."""
    rollback: bool
    """v1.15+: a container that does not fit rolls back its tentative increments."""
    release_decrements: bool
    """v1.15+: Release (deallocation before bind) gives the devices back; ≤ v1.14 it is a no-op."""
    uuid_filter: bool
    """master: ``vgpu-use-gpuuuid`` / ``vgpu-nouse-gpuuuid``."""
    strict_pod_devices: bool
    """master skips PodDevices devices with non-uint32 numbers; older versions read them as 0."""


def normalize_version(version: str) -> str:
    """``"1.15"``, ``"v1.15.2"`` → ``"v1.15"``; ``"master"`` or anything ≥ v1.16 → ``"master"``."""
    v = version.strip().lower()
    if v in ("master", "main", "latest"):
        return "master"
    m = re.fullmatch(r"v?1\.(\d+)(?:\.\d+)?(?:-[0-9a-z.]+)?", v)
    if m is None:
        raise ValueError(f"unknown Volcano version {version!r}; use one of {', '.join(VERSIONS)}")
    minor = int(m.group(1))
    if minor >= 16:
        return "master"
    if minor < 9:
        raise ValueError(f"Volcano {version} predates the hamivgpu device (needs >= v1.9)")
    return f"v1.{minor}"


def switches_for(version: str) -> VersionSwitches:
    name = normalize_version(version)
    i = _MINOR[name]

    def since(v: str) -> bool:
        return i >= _MINOR[v]

    return VersionSwitches(
        name=name,
        min_register_fields=6 if since("v1.12") else 5,
        handshake=not since("master"),
        annotations_on_binding=since("master"),
        node_lock_honoured=since("v1.10"),
        signed_memory_compare=since("v1.10"),
        float_percentage=since("v1.14"),
        configmap_resource_names=since("v1.13"),
        percentage_name_without_configmap=not since("v1.13"),
        percentage_overrides_memory=since("v1.14"),
        percentage_reused_across_cards=not since("v1.14"),
        rebuild_first_container_per_gpu=name in ("v1.12", "v1.15", "master"),
        zero_count_charged=since("v1.12"),
        session_double_count=name in ("v1.12", "v1.13"),
        mig_slot_recorded_in_session=not since("v1.14"),
        nouse_single_value_bug=not since("v1.12"),
        mig=since("v1.12"),
        factor_in_mig_pick=since("v1.15"),
        policy_drives_order=since("v1.15"),
        spread_score_used_num=0 if since("v1.15") else 1,
        node_order_uses_score=since("v1.13"),
        queue_scalars=since("v1.13"),
        podgroup_spread=since("v1.15"),
        rollback=since("v1.15"),
        release_decrements=since("v1.15"),
        uuid_filter=since("master"),
        strict_pod_devices=since("master"),
    )
