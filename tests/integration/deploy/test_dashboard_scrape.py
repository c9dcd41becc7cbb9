"""Every metric the Grafana dashboard queries is one a real `vgpu monitor` (or, for the plugin's
panels, the real `vgpu plugin`) exports.

The monitor runs as in the DaemonSet, against the fake NVML and the simulated API server, after
the real plugin allocated a pod; the test then plays HAMi-core inside that container (a v1.2
shared region in the directory the plugin mounted, with memory, SM utilization and a kernel
launch), leaves one file the monitor must reject, and makes NVML fail a utilization query on
a third GPU.  On another GPU a MIG allocation exists: the plugin's own MIG code (startup enabling
MIG mode, then the Allocate path) runs in a child process on the same fake NVML for a pod bound
with a MIG slot, as a mig-mode node's plugin would, so ``hami_mig_device_info`` has a sample
(one node serves one mode, so the hami-core plugin under test cannot make this allocation
itself).  Every family the dashboard shows then has samples, and the dashboard's names are
compared with the sample names of a real /metrics scrape.
"""

from __future__ import annotations

import json
import pathlib

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.nvml.conftest import NvmlChild
from tests.integration.volcano.conftest import MEMORY, NODE, NUMBER, UUID0, UUID1, a10, a100
from tests.unit.deploy.test_dashboard import plugin_sample_names, queried_metrics
from vgpu.protocol import allocation_progress, decode_pod_devices, keys, scheduler_allocation
from vgpu.sim.hamicore.writer import RegionWriter
from vgpu.sim.kubelet.admission import pod_manifest

from .conftest import wait_until

NVML_ERROR_UNKNOWN = 999  # a failure: NOT_SUPPORTED is an answer, not counted as an error


def _play_hami_core(container, hook_path: pathlib.Path) -> RegionWriter:
    envs = container.envs
    mounts = {mnt.container_path: mnt.host_path for mnt in container.mounts}
    cache = envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"]
    assert cache.startswith("/tmp/vgpu/")
    host_file = pathlib.Path(mounts["/tmp/vgpu"]) / cache.rsplit("/", 1)[1]
    assert host_file.parent.parent == hook_path / "containers"
    region = RegionWriter.create(host_file, "v1.2", env=envs)
    region.init_devices(envs["NVIDIA_VISIBLE_DEVICES"].split(","))
    region.attach(4242)
    region.add_memory(4242, 0, 300 << 20, "context")
    region.add_memory(4242, 0, 512 << 20, "data")
    region.set_monitor(4242, 0, sm_util=37)
    region.kernel_launch()
    return region


def _mig_allocation(cluster, gpu_index: int, uuid: str) -> tuple[NvmlChild, str]:
    """A pod holding a 2g.20gb instance of GPU ``gpu_index``: MIG mode enabled and the instance
    carved by the plugin's MIG code, the pod annotated as the scheduler and the plugin leave it.
    Returns the child (close it) and the MIG device UUID the container got."""
    seg = f"{uuid}[group2-0],NVIDIA,20000,0:"
    cluster.create_pod(
        pod_manifest(
            "mig-job",
            [{"name": "trainer", "limits": {NUMBER: 1, MEMORY: 20000}}],
            namespace="ml",
            annotations={keys.VGPU_MODE: "mig"},
        )
    )
    pod = cluster.store.bind("ml", "mig-job", NODE, scheduler_allocation(NODE, decode_pod_devices(seg), 1784884863))
    child = NvmlChild(
        cluster.nvml.env,
        (
            "from tests.integration.mig.node import Node\n"
            "from vgpu.mig import prepare_mig_gpus\n"
            "from vgpu.nvml.discovery import discover_gpus\n"
            "node = Node(None)\n"
            f"report = prepare_mig_gpus(node.manager, [node.gpus[{gpu_index}]])\n"
            "node.gpus = discover_gpus(None)\n"
            "node.manager.set_gpus(node.gpus)\n"
        ),
    )
    try:
        assert child.eval("list(report.usable)") == [uuid]
        assert [d.uuid for d in decode_pod_devices(seg)[0]] == [uuid]
        got = child.eval(f"node.allocate(__import__('json').loads({json.dumps(pod)!r}), 0, [])")
        assert "uuids" in got, got
        # What the plugin's Allocate writes after the last segment, then the kubelet starts the pod.
        cluster.store.patch("pods", "ml", "mig-job", {"metadata": {"annotations": allocation_progress("")}})
        assert cluster.annotations("mig-job", "ml")[keys.BIND_PHASE] == "success"
        cluster.store.patch("pods", "ml", "mig-job", {"status": {"phase": "Running"}}, "merge", subresource="status")
    except BaseException:
        child.close()
        raise
    return child, got["uuids"][0]


def _sample_names(text: str) -> set[str]:
    names = set()
    for family in text_string_to_metric_families(text):
        names.update(s.name for s in family.samples)
    return names


def test_dashboard_queries_only_metrics_a_real_monitor_exports(cluster_factory, monitor_factory):
    from .conftest import run_allocation_flow

    # Three GPUs: one for the hami-core pod, one MIG-capable A100 for the MIG allocation (a MIG GPU
    # reports no utilization by design) and one whose utilization query NVML fails.
    gpus = [a100(0, UUID0), a100(1, UUID1), a10(2)]
    uuids = [g["uuid"] for g in gpus]
    cluster = cluster_factory(gpus)
    container = run_allocation_flow(cluster)
    hami_gpu = uuids.index(container.envs["NVIDIA_VISIBLE_DEVICES"])
    mig_gpu = min({0, 1} - {hami_gpu})
    (failing_gpu,) = {0, 1, 2} - {hami_gpu, mig_gpu}
    region = _play_hami_core(container, cluster.hook_path)
    mig_child = None
    try:
        mig_child, mig_uuid = _mig_allocation(cluster, mig_gpu, uuids[mig_gpu])
        bad = cluster.hook_path / "containers" / "00000000-0000-0000-0000-0000000000aa_bad"
        bad.mkdir()
        (bad / "x.cache").write_bytes(b"not a region")
        cluster.nvml.inject_error("nvmlDeviceGetUtilizationRates", NVML_ERROR_UNKNOWN, index=failing_gpu)
        mon = monitor_factory(cluster)
        from_plugin = queried_metrics() & plugin_sample_names()  # docs/metrics.md §10: the plugin's endpoint
        wanted = queried_metrics() - from_plugin
        scraped: set[str] = set()
        plugin_scraped = _sample_names(cluster.plugin.get("/metrics")[1])
        assert from_plugin <= plugin_scraped, f"not in the plugin's /metrics: {sorted(from_plugin - plugin_scraped)}"

        def complete() -> bool:
            nonlocal scraped
            scraped = _sample_names(mon.scrape().decode())
            return wanted <= scraped

        try:
            wait_until(complete, 45, "every dashboard metric in the monitor's /metrics")
        except AssertionError:
            pass
        missing = sorted(wanted - scraped)
        assert not missing, f"the dashboard queries metrics the monitor does not export: {missing}"
        # The MIG table's row: the instance the plugin's MIG code handed to the container.
        (mig,) = [
            s
            for f in text_string_to_metric_families(mon.scrape().decode())
            if f.name == "hami_mig_device_info"
            for s in f.samples
        ]
        assert {k: mig.labels[k] for k in ("namespace", "pod", "container", "profile", "mig_uuid", "device_uuid")} == {
            "namespace": "ml",
            "pod": "mig-job",
            "container": "trainer",
            "profile": "2g.20gb",
            "mig_uuid": mig_uuid,
            "device_uuid": uuids[mig_gpu],
        }
    finally:
        region.close()
        if mig_child is not None:
            mig_child.close()
