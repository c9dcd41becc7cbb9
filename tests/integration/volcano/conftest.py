"""A simulated cluster for the Volcano end-to-end tests.

Real processes and real sockets: the simulated API server over HTTP on 127.0.0.1, the REAL
``vgpu plugin`` process (fake NVML, ``KUBECONFIG`` pointing at the server, ``HOOK_PATH`` in a
temp dir), the fake kubelet on unix sockets, and the Volcano scheduler emulator talking to
the server through the official client.  The kubelet's admission is driven by
``vgpu.sim.kubelet.admission.Admitter``; the node's ``status.allocatable`` is copied from the fake
kubelet, as the real kubelet's status loop would.  Everything is torn down, also on failure.
"""

from __future__ import annotations

import pathlib
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.integration.plugin.conftest import PluginProcess
from vgpu.protocol import keys
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.kubelet.admission import Admitter, node_status_from_kubelet, update_node_resources
from vgpu.sim.nvml import fakenvml
from vgpu.sim.scheduler import VolcanoSchedulerEmulator
from vgpu.sim.scheduler.model import SchedulerConfig

NODE = "node-1"
NUMBER, MEMORY, CORES = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"
NAMES = (NUMBER, MEMORY, CORES)
# The GPUs of the worked example (docs/protocol.md §6), minor 0 and 1.
UUID0 = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
UUID1 = "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c"


def a100(index: int, uuid: str | None = None) -> dict[str, Any]:
    return fakenvml.device(index, uuid=uuid)


def a10(index: int) -> dict[str, Any]:
    """24 GiB: four of them stay under the 4 MiB ListAndWatch limit at gpuMemoryFactor 1."""
    return fakenvml.device(index, name="NVIDIA A10", memory_total_mib=24576, mig_capable=False)


@dataclass
class Cluster:
    api: ApiServer
    kubelet: FakeKubelet
    plugin: PluginProcess
    nvml: fakenvml.FakeNvml
    hook_path: pathlib.Path
    core: k8s.CoreV1Api
    admitter: Admitter

    @property
    def store(self):
        return self.api.store

    def node(self) -> dict[str, Any]:
        return self.store.get("nodes", None, NODE)

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        return self.store.get("pods", namespace, name)

    def annotations(self, name: str, namespace: str = "default") -> dict[str, str]:
        return dict(self.pod(name, namespace)["metadata"].get("annotations") or {})

    def scheduler(self, version: str = "master", **kw: Any) -> VolcanoSchedulerEmulator:
        return VolcanoSchedulerEmulator(self.core, SchedulerConfig(version=version, **kw))

    def create_pod(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return self.store.create("pods", manifest, manifest["metadata"].get("namespace", "default"))

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        evs = self.store.list("events")
        return [e for e in evs if reason is None or e.get("reason") == reason]

    def admit(self, name: str, namespace: str = "default"):
        return self.admitter.admit(self.pod(name, namespace))


def wait_registered(api: ApiServer, timeout: float = 30.0) -> str:
    return api.store.wait_for(
        lambda s: (s.get("nodes", None, NODE)["metadata"].get("annotations") or {}).get(keys.REGISTER),
        timeout,
        "the plugin's register annotation",
    )


def _wait_plugins(kubelet: FakeKubelet, plugin: PluginProcess, timeout: float = 30.0) -> None:
    """Wait for the three registrations, failing at once (with the log) if the plugin exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            kubelet.wait_for_plugins(NAMES, timeout=0.5)
            return
        except TimeoutError:
            assert plugin.proc is not None
            if plugin.proc.poll() is not None:
                raise AssertionError(
                    f"vgpu plugin exited with {plugin.proc.returncode}:\n{plugin.log()[-3000:]}"
                ) from None
            if time.monotonic() > deadline:
                raise


@pytest.fixture
def hook_path(tmp_path: pathlib.Path) -> pathlib.Path:
    d = tmp_path / "hook"
    d.mkdir()
    (d / "libvgpu.so").write_bytes(b"\x7fELF fake libvgpu for tests\n")
    return d


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    server = ApiServer(bookmark_interval=0.5).start()
    server.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def cluster_factory(tmp_path: pathlib.Path, apiserver: ApiServer, hook_path: pathlib.Path):
    """``make(devices=..., device_config=..., env=..., handshake=...)`` → a running :class:`Cluster`."""
    made: list[tuple[FakeKubelet, PluginProcess, str, k8s.ApiClient]] = []

    def make(
        devices: list[dict[str, Any]] | None = None,
        *,
        device_config: str | None = None,
        node_config: str | None = None,
        env: dict[str, str] | None = None,
        handshake: str = "auto",
        seed: int | None = 0,
        wait_register: bool = True,
    ) -> Cluster:
        sock_dir = tempfile.mkdtemp(prefix="vgpu-vo-", dir="/tmp")
        nvml = fakenvml.FakeNvml.create(tmp_path / f"nvml{len(made)}", devices or [a100(0, UUID0), a100(1, UUID1)])
        kubelet = FakeKubelet(sock_dir).start()
        kubeconfig = apiserver.kubeconfig(tmp_path / "kubeconfig")
        plugin_env = {"KUBECONFIG": str(kubeconfig), "HOOK_PATH": str(hook_path), "VGPU_HANDSHAKE": handshake}
        plugin_env.update(env or {})
        work = tmp_path / f"plugin{len(made)}"
        work.mkdir()
        plugin = PluginProcess(
            work, sock_dir, nvml, device_config=device_config, node_config=node_config, env=plugin_env, node_name=NODE
        )
        api_client = apiserver.api_client()
        made.append((kubelet, plugin, sock_dir, api_client))
        plugin.start()
        _wait_plugins(kubelet, plugin)
        update_node_resources(apiserver.store, NODE, node_status_from_kubelet(kubelet, NAMES))
        if wait_register:
            wait_registered(apiserver)
        rng = random.Random(seed) if seed is not None else None
        return Cluster(
            apiserver, kubelet, plugin, nvml, hook_path, k8s.CoreV1Api(api_client), Admitter(kubelet, rng=rng)
        )

    yield make
    for kubelet, plugin, sock_dir, api_client in made:
        plugin.terminate()
        kubelet.stop()
        api_client.close()
        shutil.rmtree(sock_dir, ignore_errors=True)
        lines = [ln if len(ln) < 400 else ln[:400] + " …" for ln in plugin.log().splitlines()]
        print(f"--- plugin log ({plugin.log_path}) ---\n" + "\n".join(lines[-80:]))


@pytest.fixture
def cluster(cluster_factory) -> Cluster:
    return cluster_factory()
