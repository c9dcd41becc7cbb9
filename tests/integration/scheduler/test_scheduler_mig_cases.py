"""Upstream MIG decisions (docs/scheduler-emulator.md §9.9 cases 6 and 8) against the real `vgpu plugin`.

The emulator makes Volcano's decision; the plugin in mig mode answers it with its MIG guards
(docs/mig.md §5.2): one geometry per GPU, one assignment per slot.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.volcano.conftest import (  # noqa: F401 - the fixtures, shared with the Volcano e2e tests
    MEMORY,
    NODE,
    NUMBER,
    apiserver,
    cluster_factory,
    hook_path,
)
from vgpu.protocol import keys
from vgpu.sim.kubelet.admission import pod_manifest
from vgpu.sim.nvml import fakenvml

NODE_CONFIG = json.dumps({"nodeconfig": [{"name": NODE, "operatingmode": "mig", "devicesplitcount": 7}]})
G1 = "GPU-00000001-6888-5063-1e4d-f2a09cfbf001"  # the fake NVML's second GPU (index descending: visited first)


def mig_pod(name: str, *memories: int) -> dict:
    ctrs = [{"name": f"c{k}", "limits": {NUMBER: 1, MEMORY: m}} for k, m in enumerate(memories)]
    return pod_manifest(name, ctrs, annotations={keys.VGPU_MODE: "mig"})


def mig_cluster(cluster_factory):  # noqa: F811
    return cluster_factory([fakenvml.device(0), fakenvml.device(1)], node_config=NODE_CONFIG)


@pytest.mark.parametrize("version, same_slot", [("v1.13", False), ("v1.14", True), ("master", True)])
def test_case8_two_pods_of_one_session(cluster_factory, version, same_slot):  # noqa: F811
    cluster = mig_cluster(cluster_factory)
    sched = cluster.scheduler(version)
    cluster.create_pod(mig_pod("a", 15000))
    cluster.create_pod(mig_pod("b", 15000))
    assert [o.node for o in sched.schedule_once()] == [NODE, NODE]  # one session, both pods
    assert cluster.annotations("a")[keys.VGPU_IDS_NEW] == f"{G1}[group2-0],NVIDIA,15000,0:"
    b_slot = 0 if same_slot else 1
    assert cluster.annotations("b")[keys.VGPU_IDS_NEW] == f"{G1}[group2-{b_slot}],NVIDIA,15000,0:"
    a = cluster.admit("a")
    if same_slot:
        # b, still allocating, holds the same slot: the first pod admitted fails, the other one gets it
        assert not a.admitted
        assert f"MIG position 0 of group group2 on {G1} is already assigned" in (a.error or "")
        assert cluster.annotations("a")[keys.BIND_PHASE] == "failed"
    else:
        assert a.admitted, a.error
    b = cluster.admit("b")
    assert b.admitted, b.error


def test_case6_second_container_in_another_group(cluster_factory):  # noqa: F811
    cluster = mig_cluster(cluster_factory)
    sched = cluster.scheduler("master")
    cluster.create_pod(mig_pod("p", 8000, 30000))
    assert [o.node for o in sched.schedule_once()] == [NODE]
    assert cluster.annotations("p")[keys.VGPU_IDS_NEW] == (
        f"{G1}[group1-0],NVIDIA,8000,0:;{G1}[group3-0],NVIDIA,30000,0:"
    )
    res = cluster.admit("p")
    assert not res.admitted
    assert f"GPU {G1} is in use by MIG group group1" in (res.error or "")
    assert cluster.annotations("p")[keys.BIND_PHASE] == "failed"
