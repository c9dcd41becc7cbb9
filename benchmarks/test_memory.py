"""Resident memory of the real daemons after startup and after a long loop (issue 10).

Plugin: the real ``vgpu plugin`` process on a fake NVML with 8 × A100-SXM4-80GB, registered with
the fake kubelet (vgpu/sim/kubelet/device_manager.py) and with the simulated API server (vgpu/sim/apiserver/server.py).
RSS is read with psutil once startup is complete (three resources registered and listed to the
kubelet, the node's register annotation written), then 1,000 pods go through the whole
lifecycle one after another: created, scheduled by the Volcano scheduler emulator
(vgpu/sim/scheduler/emulator.py: node lock, ``devices-to-allocate``, bind), admitted by the kubelet's
device manager (vgpu/sim/kubelet/admission.py: GetPreferredAllocation + Allocate for vgpu-number and
vgpu-cores; the plugin matches the pod, writes ``bind-phase=success`` and releases the lock),
then deleted (the plugin's pod watch drops it).  RSS is read again after the loop.  Gates:
``memory.plugin.rss_startup`` / ``rss_after_loop`` (≤ 120 MB) and ``memory.plugin.growth``
(≤ 5 MB).  pytest-benchmark times each lifecycle round, so the JSON also holds the end-to-end
allocation latency.  Quick mode runs the same 1,000 (about 15 s here).
"""

from __future__ import annotations

import http.client
import pathlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client as k8s

from benchmarks.conftest import assert_gates, record_gate
from benchmarks.daemons import Daemon, wait_for
from vgpu.protocol import keys
from vgpu.sim import pods as sim_pods
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.hamicore.writer import RegionWriter
from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.kubelet.admission import Admitter, node_status_from_kubelet, pod_manifest, update_node_resources
from vgpu.sim.nvml import fakenvml
from vgpu.sim.scheduler import VolcanoSchedulerEmulator
from vgpu.sim.scheduler.model import SchedulerConfig

NODE = "node-1"
NUMBER, MEMORY, CORES = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"
GPUS = 8
ALLOCATIONS = 1000
# 8 × 80 GiB at gpuMemoryFactor 1 would not fit the kubelet's 4 MiB ListAndWatch limit; 10 does.
DEVICE_CONFIG = "nvidia:\n  deviceSplitCount: 10\n  gpuMemoryFactor: 10\n"


@dataclass
class PluginCluster:
    api: ApiServer
    kubelet: FakeKubelet
    plugin: Daemon
    scheduler: VolcanoSchedulerEmulator
    admitter: Admitter


@pytest.fixture
def plugin_cluster(tmp_path: pathlib.Path) -> Iterator[PluginCluster]:
    sock_dir = tempfile.mkdtemp(prefix="vgpu-bm-", dir="/tmp")  # unix socket paths: <= 107 bytes
    api = ApiServer().start()
    kubelet = plugin = api_client = None
    try:
        api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
        nvml = fakenvml.FakeNvml.create(tmp_path / "nvml", [fakenvml.device(i) for i in range(GPUS)])
        hook = tmp_path / "hook"
        hook.mkdir()
        (hook / "libvgpu.so").write_bytes(b"\x7fELF fake libvgpu for benchmarks\n")
        (tmp_path / "device-config.yaml").write_text(DEVICE_CONFIG)
        kubelet = FakeKubelet(sock_dir).start()
        plugin = Daemon(
            [
                "plugin",
                "--metrics-listen",
                "127.0.0.1:0",  # plugins run side by side: never the fixed default port
                "--node-name",
                NODE,
                "--kubelet-socket",
                f"{sock_dir}/kubelet.sock",
                "--device-config",
                str(tmp_path / "device-config.yaml"),
                "--node-config",
                str(tmp_path / "none.json"),
            ],
            {**nvml.env, "KUBECONFIG": str(api.kubeconfig(tmp_path / "kubeconfig")), "HOOK_PATH": str(hook)},
            tmp_path / "plugin.log",
        ).start()
        kubelet.wait_for_plugins((NUMBER, MEMORY, CORES), timeout=60)
        update_node_resources(api.store, NODE, node_status_from_kubelet(kubelet, (NUMBER, MEMORY, CORES)))
        wait_for(
            lambda: (api.store.get("nodes", None, NODE)["metadata"].get("annotations") or {}).get(keys.REGISTER),
            60,
            "the plugin's register annotation",
            plugin,
        )
        api_client = api.api_client()
        scheduler = VolcanoSchedulerEmulator(k8s.CoreV1Api(api_client), SchedulerConfig(version="master"))
        yield PluginCluster(api, kubelet, plugin, scheduler, Admitter(kubelet))
    finally:
        if plugin is not None:
            plugin.stop()
        if kubelet is not None:
            kubelet.stop()
        if api_client is not None:
            api_client.close()
        api.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)


def test_plugin_rss_after_startup_and_1000_allocations(benchmark, plugin_cluster):
    c = plugin_cluster
    store = c.api.store
    n = ALLOCATIONS  # the gate is defined over 1,000; quick mode runs them too (~15 s)
    counter = iter(range(10**9))

    def one_pod_lifecycle() -> None:
        name = f"bench-{next(counter)}"
        store.create("pods", pod_manifest(name, [{"name": "c", "limits": {NUMBER: 1, CORES: 10}}]), "default")
        out = c.scheduler.schedule_once()
        assert [(o.pod, o.node) for o in out] == [(f"default/{name}", NODE)], out
        res = c.admitter.admit(store.get("pods", "default", name))
        assert res.admitted, res.error
        assert res.container("c").envs["CUDA_DEVICE_SM_LIMIT"] == "10"
        assert store.get("pods", "default", name)["metadata"]["annotations"][keys.BIND_PHASE] == "success"
        store.delete("pods", "default", name)
        c.admitter.release(f"default/{name}")

    startup = c.plugin.rss_mb()
    benchmark.pedantic(one_pod_lifecycle, rounds=n, iterations=1, warmup_rounds=0)
    after = c.plugin.rss_mb()
    assert "Traceback" not in c.plugin.log(), c.plugin.log()[-4000:]
    benchmark.extra_info.update({"allocations": n, "rss_startup_mb": startup, "rss_after_mb": after})
    print(
        f"\nvgpu plugin RSS: {startup:.1f} MB after startup, {after:.1f} MB after {n} allocations "
        f"({after - startup:+.1f} MB); pod lifecycle median {benchmark.stats.stats.median * 1e3:.1f} ms"
    )
    assert_gates(
        record_gate("memory.plugin.rss_startup", startup, gpus=GPUS),
        record_gate("memory.plugin.rss_after_loop", after, allocations=n),
        record_gate("memory.plugin.growth", after - startup, allocations=n),
    )


# ---------------------------------------------------------------------------------------- monitor

CONTAINERS = 100
SCRAPES = 1000
MIB = 2**20


def _gpu_uuid(i: int) -> str:
    return fakenvml.device(i)["uuid"]


@dataclass
class MonitorNode:
    api: ApiServer
    monitor: Daemon
    port: int


@pytest.fixture
def monitor_node(tmp_path: pathlib.Path) -> Iterator[MonitorNode]:
    """100 running pods on the node, each with one container region (v1.2, 4 processes × 2 GPUs)."""
    api = ApiServer().start()
    monitor = None
    try:
        nvml = fakenvml.FakeNvml.create(tmp_path / "nvml", [fakenvml.device(i) for i in range(GPUS)])
        containers = tmp_path / "hook" / "containers"
        for k in range(CONTAINERS):
            gpus = [_gpu_uuid((2 * k) % GPUS), _gpu_uuid((2 * k + 1) % GPUS)]
            # Served vGPU pods (limits, vgpu-ids-new): the monitor trusts only the GPUs a pod was given.
            manifest = sim_pods.pod("", f"job-{k:03d}", node=NODE, gpus={"main": gpus})
            for server_set in ("uid", "resourceVersion"):
                del manifest["metadata"][server_set]
            del manifest["status"]
            pod = api.store.create("pods", manifest, "default")
            api.store.patch(
                "pods", "default", f"job-{k:03d}", {"status": {"phase": "Running"}}, "merge", subresource="status"
            )
            d = containers / f"{pod['metadata']['uid']}_main"
            d.mkdir(parents=True)
            with RegionWriter.create(
                d / "region.cache",
                "v1.2",
                env={"CUDA_DEVICE_MEMORY_LIMIT_0": "3000m", "CUDA_DEVICE_MEMORY_LIMIT_1": "2048m"},
            ) as w:
                w.init_devices(gpus)
                for pid in range(1, 5):
                    w.attach(pid)
                    w.add_memory(pid, 0, 64 * MIB)
                    w.add_memory(pid, 1, 32 * MIB)
        monitor = Daemon(
            [
                "monitor",
                "--node-name",
                NODE,
                "--hook-path",
                str(tmp_path / "hook"),
                "--listen",
                "127.0.0.1:0",
                "--kubeconfig",
                str(api.kubeconfig(tmp_path / "kubeconfig")),
                "--device-config",
                str(tmp_path / "none.yaml"),
            ],
            nvml.env,
            tmp_path / "monitor.log",
        ).start()
        port = int(monitor.wait_for_log(r"serving metrics on http://[0-9.]+:(\d+)/metrics", 60).group(1))
        yield MonitorNode(api, monitor, port)
    finally:
        if monitor is not None:
            monitor.stop()
        api.stop()


def _container_samples(body: bytes) -> int:
    """How many containers × devices the scrape reports memory for (HAMi family)."""
    return sum(1 for line in body.splitlines() if line.startswith(b"hami_vgpu_memory_used_bytes{"))


def test_monitor_rss_after_startup_and_1000_scrapes_of_100_containers(benchmark, monitor_node):
    m = monitor_node
    conn = http.client.HTTPConnection("127.0.0.1", m.port, timeout=30)

    def scrape() -> bytes:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == 200, body[:500]
        return body

    try:
        # Startup is complete once the first scan has found every container (and the pods are known).
        wait_for(
            lambda: _container_samples(scrape()) == 2 * CONTAINERS, 60, "all 100 containers in /metrics", m.monitor
        )
        startup = m.monitor.rss_mb()
        benchmark.pedantic(scrape, rounds=SCRAPES, iterations=1, warmup_rounds=0)
        assert _container_samples(scrape()) == 2 * CONTAINERS
        after = m.monitor.rss_mb()
    finally:
        conn.close()
    assert "Traceback" not in m.monitor.log(), m.monitor.log()[-4000:]
    benchmark.extra_info.update(
        {"containers": CONTAINERS, "scrapes": SCRAPES, "rss_startup_mb": startup, "rss_after_mb": after}
    )
    print(
        f"\nvgpu monitor RSS: {startup:.1f} MB after startup, {after:.1f} MB after {SCRAPES} scrapes of "
        f"{CONTAINERS} containers ({after - startup:+.1f} MB); "
        f"scrape median {benchmark.stats.stats.median * 1e3:.2f} ms"
    )
    assert_gates(
        record_gate("memory.monitor.rss_startup", startup, containers=CONTAINERS),
        record_gate("memory.monitor.rss_after_loop", after, scrapes=SCRAPES),
        record_gate("memory.monitor.growth", after - startup, scrapes=SCRAPES),
    )
