"""Upstream over-commit (docs/scheduler-emulator.md §9.9 case 4) against the real `vgpu plugin`.

Volcano v1.12, v1.15 and master count only the first container of a pod on a GPU when they rebuild
their ledger, so they place a 30 GiB pod on an 80 GiB GPU that already holds 2 × 40 GiB. (A
one-GPU node would not show it: the kubelet's own count of vgpu-memory IDs refuses the pod first.)
The emulator reproduces that decision; the plugin's guard (docs/decisions.md decision 11) refuses the
assignment at Allocate with a ``VGPUAllocationFailed`` Event that names the GPU, what is committed
and what was asked. v1.13 and v1.14 count both containers and place the pod on the other GPU.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from tests.integration.volcano.conftest import (  # noqa: F401 - the fixtures, shared with the Volcano e2e tests
    MEMORY,
    NAMES,
    NODE,
    NUMBER,
    UUID0,
    UUID1,
    apiserver,
    cluster_factory,
    hook_path,
)
from tests.support.metrics_text import value
from vgpu.protocol import keys
from vgpu.sim.kubelet.admission import pod_manifest

GIB40, GIB30 = 40960, 30720


def _two_containers_on_one_gpu(cluster, sched, each: int = GIB40) -> None:
    limits = {NUMBER: 1, MEMORY: each}
    cluster.create_pod(pod_manifest("two", [{"name": "a", "limits": limits}, {"name": "b", "limits": limits}]))
    out = sched.schedule_once()
    assert [o.node for o in out] == [NODE], out
    assert cluster.annotations("two")[keys.VGPU_IDS_NEW] == f"{UUID1},NVIDIA,{each},0:;{UUID1},NVIDIA,{each},0:"
    res = cluster.admit("two")
    assert res.admitted, res.error
    assert cluster.annotations("two")[keys.BIND_PHASE] == "success"
    sched.schedule_once()  # the scheduler's pod informer sees the bound pod
    sched.resync_nodes()  # any node event rebuilds the ledger from the annotations


@pytest.mark.parametrize("version", ["v1.12", "v1.15", "master"])
def test_guard_refuses_upstream_overcommit(cluster_factory, version):  # noqa: F811
    cluster = cluster_factory()
    sched = cluster.scheduler(version)
    _two_containers_on_one_gpu(cluster, sched)
    assert sched.core.nodes[NODE].gpus[1].used_mem == GIB40  # the second container is not counted

    cluster.create_pod(pod_manifest("extra", [{"name": "c", "limits": {NUMBER: 1, MEMORY: GIB30}}]))
    out = sched.schedule_once()
    assert [o.node for o in out] == [NODE], out  # upstream's decision: 110 GiB on an 80 GiB GPU
    assert cluster.annotations("extra")[keys.VGPU_IDS_NEW] == f"{UUID1},NVIDIA,{GIB30},0:"

    res = cluster.admit("extra")
    assert not res.admitted
    assert f"GPU {UUID1} would be over-committed" in (res.error or "")
    assert cluster.annotations("extra")[keys.BIND_PHASE] == "failed"
    uid = cluster.pod("extra")["metadata"]["uid"]
    [event] = [e for e in cluster.events("VGPUAllocationFailed") if e["involvedObject"].get("uid") == uid]
    msg = event["message"]
    assert f"GPU {UUID1}" in msg
    assert f"{2 * GIB40} of its 81920 MiB memory" in msg and "default/two" in msg
    assert f"container c asks {GIB30} MiB and 0 %" in msg
    assert event["type"] == "Warning"
    metrics = cluster.plugin.get("/metrics")[1]
    assert value(metrics, "vgpu_plugin_allocations_total", resource=NUMBER, result="failure", reason="overcommit") == 1
    # the pod that was there keeps running untouched
    assert cluster.annotations("two")[keys.BIND_PHASE] == "success"


@pytest.mark.parametrize("version", ["v1.13", "v1.14"])
def test_versions_that_count_every_container_place_it_elsewhere(cluster_factory, version):  # noqa: F811
    cluster = cluster_factory()
    sched = cluster.scheduler(version)
    _two_containers_on_one_gpu(cluster, sched)
    assert sched.core.nodes[NODE].gpus[1].used_mem == 2 * GIB40
    cluster.create_pod(pod_manifest("extra", [{"name": "c", "limits": {NUMBER: 1, MEMORY: GIB30}}]))
    assert [o.node for o in sched.schedule_once()] == [NODE]
    assert cluster.annotations("extra")[keys.VGPU_IDS_NEW] == f"{UUID0},NVIDIA,{GIB30},0:"
    res = cluster.admit("extra")
    assert res.admitted, res.error


def test_guard_lets_a_fitting_pod_through(cluster_factory):  # noqa: F811
    cluster = cluster_factory()
    sched = cluster.scheduler("master")
    _two_containers_on_one_gpu(cluster, sched, each=20480)
    cluster.create_pod(pod_manifest("extra", [{"name": "c", "limits": {NUMBER: 1, MEMORY: GIB30}}]))
    assert [o.node for o in sched.schedule_once()] == [NODE]
    res = cluster.admit("extra")  # 2 × 20 GiB + 30 GiB ≤ 80 GiB: served
    assert res.admitted, res.error
    assert res.container("c").envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{GIB30}m"


def test_guard_after_a_plugin_restart_counts_the_pods_served_before(cluster_factory):  # noqa: F811
    cluster = cluster_factory()
    sched = cluster.scheduler("master")
    _two_containers_on_one_gpu(cluster, sched)
    # Restart the plugin once the clock has left the second "two" was created in (creation
    # timestamps have whole seconds): the new process has served nothing and trusts the
    # bind-phase=success pods created before it started.
    created = cluster.pod("two")["metadata"]["creationTimestamp"]
    deadline = time.monotonic() + 5
    while datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") <= created:
        assert time.monotonic() < deadline, created
        time.sleep(0.05)
    since = time.monotonic()
    cluster.plugin.terminate()
    cluster.plugin.start(append=True)
    cluster.kubelet.wait_for_plugins(NAMES, timeout=30, since=since)

    cluster.create_pod(pod_manifest("extra", [{"name": "c", "limits": {NUMBER: 1, MEMORY: GIB30}}]))
    assert [o.node for o in sched.schedule_once()] == [NODE]
    res = cluster.admit("extra")
    assert not res.admitted
    assert f"GPU {UUID1} would be over-committed: {2 * GIB40} of its 81920 MiB" in (res.error or "")
