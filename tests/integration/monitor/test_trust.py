"""The real `vgpu monitor` trusts only what the plugin assigned (docs/metrics.md §5.1).

A container writes its own region, so the GPU UUIDs and the priority in it are claims.  The
monitor takes a container's GPUs from its segment of the pod's ``volcano.sh/vgpu-ids-new`` and its
priority from the pod's ``CUDA_TASK_PRIORITY``: a region claiming a GPU it was never given, with
priority -2^31, must neither block the container that owns that GPU nor be exported under it.
"""

from __future__ import annotations

from tests.unit.monitor.helpers import MIB, UUIDS, add_container, new_uid, one, parse, wait_until
from vgpu.sim.hamicore.writer import RegionWriter

from .conftest import create_pod

ONE_TICK = 5.0 + 2.0  # the feedback period plus slack for a loaded CI machine
INT32_MIN = -(2**31)


def _uids(*pods):
    return [p["metadata"]["uid"] for p in pods]


def test_a_region_claiming_another_containers_gpu_neither_blocks_it_nor_is_exported_under_it(
    apiserver, start_monitor, hook
):
    victim_uid, attacker_uid = _uids(
        create_pod(apiserver, "victim", gpus={"main": [UUIDS[0]]}, env={"main": {"CUDA_TASK_PRIORITY": "0"}}),
        create_pod(
            apiserver,
            "attacker",
            namespace="evil",
            gpus={"main": [UUIDS[1]]},
            env={"main": {"CUDA_TASK_PRIORITY": "1"}},
        ),
    )
    victim = add_container(hook, victim_uid, "main", priority=0, uuids=[UUIDS[0]], limits_mib=[100], procs=[(1, [10])])
    # The attacker's region: the victim's GPU first, its own second, priority -2^31 (pod says 1).
    attacker = add_container(
        hook,
        attacker_uid,
        "main",
        priority=INT32_MIN,
        uuids=[UUIDS[0], UUIDS[1]],
        limits_mib=[100, 100],
        procs=[(2, [666, 7])],
    )
    # A directory whose pod the monitor does not know, making the same claim (docs/metrics.md §5.1).
    ghost_uid = new_uid()
    ghost = add_container(hook, ghost_uid, "main", priority=INT32_MIN, uuids=[UUIDS[0]], procs=[(3, [5])])
    victim_w, attacker_w, ghost_w = (RegionWriter.create(p, "v1.2", env={}) for p in (victim, attacker, ghost))
    try:
        mon = start_monitor()  # its first tick runs before it serves
        seen = [victim_w.feedback()]
        for tick in range(3):  # the attacker and the ghost stay active over several ticks
            attacker_w.kernel_launch()
            ghost_w.kernel_launch()
            victim_w.kernel_launch()
            wait_until(
                lambda: attacker_w.feedback()[1] < 2 and victim_w.feedback()[1] < 2,
                ONE_TICK,
                f"feedback tick {tick + 2}",
                step=0.02,
            )
            seen.append(victim_w.feedback())
        assert all(rk != -1 for _, rk in seen), f"the victim was blocked: (switch, recent_kernel) per tick {seen}"
        assert seen[-1] == (0, 1)  # alone on its GPU among trusted containers: unlimited, active

        s = parse(mon.scrape())
        for name, uuid_label, pod_label in (
            ("hami_vgpu_memory_used_bytes", "device_uuid", "pod"),
            ("hami_container_device_memory_bytes", "device_uuid", "pod"),
            ("vGPU_device_memory_usage_in_bytes", "deviceuuid", "podname"),
            ("Device_memory_desc_of_container", "deviceuuid", "podname"),
        ):
            on_victims_gpu = {lab[pod_label] for lab, _ in s[name] if lab[uuid_label] == UUIDS[0]}
            assert on_victims_gpu == {"victim", ghost_uid}, name  # the ghost: by pod UID, as before
        a = dict(namespace="evil", pod="attacker", container="main")
        assert one(s, "hami_vgpu_memory_used_bytes", **a, vdevice_index="1", device_uuid=UUIDS[1]) == 7 * MIB
        assert one(s, "hami_vgpu_memory_used_bytes", pod="victim", device_uuid=UUIDS[0]) == 10 * MIB
        mismatches = {lab["reason"]: v for lab, v in s["vgpu_monitor_region_mismatches_total"]}
        assert mismatches == {"unassigned_gpu": 1.0, "priority": 1.0}  # once per container and reason
        log = mon.log()
        assert log.count(f"claims GPU {UUIDS[0]}") == 1, log  # logged once, naming the container
        assert "evil/attacker container main" in log
    finally:
        for w in (victim_w, attacker_w, ghost_w):
            w.close()
