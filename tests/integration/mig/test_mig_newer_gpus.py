"""The newest GPUs in MIG mode end to end (docs/mig.md §2.2, §3): for H200, H20, B200 and GB200,
the real `vgpu plugin` in mode mig with the shipped entries, the scheduler emulator with the same
entries, the fake kubelet's admission, and the fake NVML's tables for the model.

Per model: the register annotation advertises the GPU in mig mode; a pod that needs a 2g
instance gets group2 position 0, the plugin carves upstream's group2 layout (2g ×3 + 1g ×1) and
hands the container that instance's MIG UUID; a second, 1g-sized pod then gets the next free
position of the same layout without a reshape.
"""

from __future__ import annotations

import pytest
import yaml

from tests.integration.volcano.conftest import (  # noqa: F401 - fixtures used by name
    NODE,
    apiserver,
    cluster_factory,
    hook_path,
)
from vgpu.config.mig_defaults import SHIPPED_MIG_GEOMETRIES, geometries_as_data
from vgpu.protocol import decode_register, keys
from vgpu.sim.nvml import fakenvml

from .conftest import MigChild
from .test_mig_apply import check_layout
from .test_mig_e2e import NODE_CONFIG, G, mig_pod, slot_of

# model -> (NVML name, memory.total MiB, 1g profile, 2g profile, their nominal sizes: docs/mig.md §3)
MODELS = {
    "H200": ("NVIDIA H200 141GB HBM3e", 143771, "1g.18gb", 18432, "2g.35gb", 35840),
    "H20": ("NVIDIA H20", 97871, "1g.12gb", 12032, "2g.24gb", 24064),
    "B200": ("NVIDIA B200", 183359, "1g.23gb", 22784, "2g.45gb", 45568),
    "GB200": ("NVIDIA GB200", 189952, "1g.23gb", 23552, "2g.47gb", 47104),
}
# gpuMemoryFactor 2: a GB200 at factor 1 would need 4.26 MB of vgpu-memory IDs, more than the
# kubelet's 4 MiB ListAndWatch limit (docs/kubelet-api.md §7.2); requests are in units of 2 MiB.
FACTOR = 2
DEVICE_CONFIG = yaml.safe_dump(
    {"nvidia": {"gpuMemoryFactor": FACTOR, "knownMigGeometries": geometries_as_data(SHIPPED_MIG_GEOMETRIES)}},
    sort_keys=False,
)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_shipped_geometry_applies_end_to_end(cluster_factory, model):  # noqa: F811
    name, total, one_g, one_mem, two_g, _two_mem = MODELS[model]
    cluster = cluster_factory(
        [fakenvml.device(0, name=name, memory_total_mib=total)], device_config=DEVICE_CONFIG, node_config=NODE_CONFIG
    )
    reg = decode_register(cluster.node()["metadata"]["annotations"][keys.REGISTER])
    assert [(r.uuid, r.mode, r.count, r.type) for r in reg] == [(G[0], "mig", 7, f"NVIDIA-{name}")]
    view = MigChild(cluster.nvml, DEVICE_CONFIG, startup=False)  # reads what the plugin made
    try:
        sched = cluster.scheduler("master", known_mig_geometries=SHIPPED_MIG_GEOMETRIES, gpu_memory_factor=FACTOR)
        cluster.create_pod(mig_pod("two", one_mem // FACTOR + 1))  # too big for 1g: the first fitting group is group2
        assert [o.node for o in sched.schedule_once()] == [NODE]
        res = cluster.admit("two")
        assert res.admitted, res.error
        assert slot_of(cluster, "two") == (0, "group2", 0)
        plan = [(two_g, 0, 2), (two_g, 2, 2), (two_g, 4, 2), (one_g, 6, 1)]
        check_layout(view, plan, view.call("apply(0, 'group2')"))  # already in place: no change
        want = view.call("lookup(0, 'group2', 0)")
        assert (want["profile"], res.container("c0").envs) == (two_g, {"NVIDIA_VISIBLE_DEVICES": want["uuid"]})
        # A 1g-sized pod gets the next free position of the layout already carved (the group sticks).
        cluster.create_pod(mig_pod("one", one_mem // FACTOR))
        assert [o.node for o in sched.schedule_once()] == [NODE]
        res = cluster.admit("one")
        assert res.admitted, res.error
        assert slot_of(cluster, "one") == (0, "group2", 1)
        assert res.container("c0").envs == {"NVIDIA_VISIBLE_DEVICES": view.call("lookup(0, 'group2', 1)")["uuid"]}
        check_layout(view, plan, view.call("apply(0, 'group2')"))  # no reshape for the second pod
    finally:
        view.close()
