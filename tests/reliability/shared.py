"""One simulated cluster shared by the fault tests whose faults are fully undone, reset to a known state per test.

Starting the REAL ``vgpu plugin`` (a Python process) dominates a cluster's start (~3 s on the
2-core machine), so the tests whose fault ends with the cluster as it was (API faults that are
cleared, a kubelet restart the plugin re-registers after, a ``$HOOK_PATH`` fixed again, a plugin
SIGTERM followed by its restart, the soak) share one.  Tests whose fault cannot be undone (a lost
GPU, a hung NVML call, a different device config) build their own with ``cluster_factory``.

:meth:`SharedCluster.checkout` gives every test the same starting state as a fresh cluster:
no pods and no Events in the store, no API fault rules, the fake NVML config as written at start,
a fresh kubelet-side ``Admitter`` — and it *verifies* what it cannot reset: the plugin is
running, all three resources are registered with every ID healthy, the node's register
annotation is the one of the start and no node lock is held, the plugin's watches are open again
(as many as at start), ``$HOOK_PATH/containers`` is a directory (or not created yet).  When a
check does not hold within :data:`SETTLE_S` (or the previous test failed), the cluster is torn
down and built again, so no test ever inherits another's damage.
"""

from __future__ import annotations

import pathlib
import random
import shutil
import tempfile
import time
from dataclasses import dataclass

from kubernetes import client as k8s

from tests.integration.plugin.conftest import PluginProcess
from tests.integration.volcano.conftest import (
    NAMES,
    NODE,
    UUID0,
    UUID1,
    Cluster,
    _wait_plugins,
    a100,
    wait_registered,
)
from vgpu.protocol import keys
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.kubelet.admission import Admitter, node_status_from_kubelet, update_node_resources
from vgpu.sim.nvml import fakenvml

SETTLE_S = 10.0  # how long checkout waits for the plugin to reconverge (watches, lock) before rebuilding


@dataclass
class _Baseline:
    register: str
    healthy: dict[str, int]
    watches: dict[str, int]
    nvml_config: bytes


class SharedCluster:
    """The parts of :class:`Cluster` that live across tests, plus what a fresh one looked like."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.builds = 0
        self.restarts = 0
        self._plugin_env: dict[str, str] = {}
        self.dirty: str | None = "not built yet"
        self._parts: (
            tuple[ApiServer, FakeKubelet, PluginProcess, fakenvml.FakeNvml, pathlib.Path, str, k8s.ApiClient] | None
        ) = None
        self._baseline: _Baseline | None = None

    # ------------------------------------------------------------ build / close

    def _build(self) -> None:
        """What tests/integration/volcano's ``cluster_factory()`` builds, with its own API server."""
        self.builds += 1
        work = self.root / f"build{self.builds}"
        hook = work / "hook"
        hook.mkdir(parents=True)
        (hook / "libvgpu.so").write_bytes(b"\x7fELF fake libvgpu for tests\n")
        api = ApiServer(bookmark_interval=0.5).start()
        api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
        sock_dir = tempfile.mkdtemp(prefix="vgpu-rel-shared-", dir="/tmp")
        nvml = fakenvml.FakeNvml.create(work / "nvml", [a100(0, UUID0), a100(1, UUID1)])
        kubelet = FakeKubelet(sock_dir).start()
        env = {"KUBECONFIG": str(api.kubeconfig(work / "kubeconfig")), "HOOK_PATH": str(hook), "VGPU_HANDSHAKE": "auto"}
        (work / "plugin").mkdir()
        self._plugin_env = env
        plugin = PluginProcess(work / "plugin", sock_dir, nvml, env=env, node_name=NODE)
        api_client = api.api_client()
        self._parts = (api, kubelet, plugin, nvml, hook, sock_dir, api_client)
        plugin.start()
        _wait_plugins(kubelet, plugin)
        update_node_resources(api.store, NODE, node_status_from_kubelet(kubelet, NAMES))
        register = wait_registered(api)
        # The plugin's watches (pods of this node, the node) are open once it has registered and
        # listed; wait until the counts are stable for a moment to take them as the baseline.
        watches = self._stable_watches(api)
        self._baseline = _Baseline(
            register=register,
            healthy={n: len(kubelet.plugin(n).healthy_ids()) for n in NAMES},
            watches=watches,
            nvml_config=nvml.config_path.read_bytes(),
        )
        self.dirty = None

    @staticmethod
    def _stable_watches(api: ApiServer, timeout: float = 10.0) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while True:
            now = {r: api.store.watch_count(r) for r in ("pods", "nodes")}
            if now != last:
                last, since = now, time.monotonic()
            elif now["pods"] and now["nodes"] and time.monotonic() - since >= 0.3:
                return now
            if time.monotonic() > deadline:
                raise AssertionError(f"the plugin's watches did not settle: {now}")
            time.sleep(0.02)

    def close(self) -> None:
        if self._parts is None:
            return
        api, kubelet, plugin, _nvml, _hook, sock_dir, api_client = self._parts
        self._parts = None
        try:
            plugin.terminate()
        finally:
            kubelet.stop()
            api_client.close()
            api.stop()
            shutil.rmtree(sock_dir, ignore_errors=True)

    # ------------------------------------------------------------ per test

    def _unclean(self) -> str | None:
        """Reset what a test may leave behind; None when the known state holds, else why not."""
        assert self._parts is not None and self._baseline is not None
        api, kubelet, plugin, nvml, hook, _sock, _client = self._parts
        base = self._baseline
        if not api.running:
            return "the API server is not running"
        if plugin.proc is None or plugin.proc.poll() is not None:
            return "the plugin is not running"
        api.faults.clear()
        for ev in api.store.list("events"):
            api.store.delete("events", ev["metadata"].get("namespace"), ev["metadata"]["name"])
        for pod in api.store.list("pods"):
            api.store.delete("pods", pod["metadata"].get("namespace"), pod["metadata"]["name"])
        if nvml.config_path.read_bytes() != base.nvml_config:
            return "the fake NVML config changed"
        containers = hook / "containers"
        if containers.exists() and not containers.is_dir():
            return f"{containers} is not a directory"

        def state() -> str | None:
            for n in NAMES:
                p = kubelet.plugin(n)
                if p is None or len(p.healthy_ids()) != base.healthy[n]:
                    return f"{n}: {'not registered' if p is None else len(p.healthy_ids())} healthy IDs"
            ann = api.store.get("nodes", None, NODE)["metadata"].get("annotations") or {}
            if ann.get(keys.REGISTER) != base.register:
                return "the node's register annotation differs from the start"
            if keys.NODE_LOCK in ann:
                return "the node lock is held"
            watches = {r: api.store.watch_count(r) for r in base.watches}
            if watches != base.watches:
                return f"the plugin's watches are {watches}, {base.watches} at start"
            return None

        deadline = time.monotonic() + SETTLE_S
        while (why := state()) is not None:
            if time.monotonic() > deadline:
                return why
            time.sleep(0.02)
        return None

    def checkout(self) -> Cluster:
        """The shared cluster in its known starting state (rebuilt when it cannot be brought back)."""
        if self._parts is not None and self.dirty is None:
            self.dirty = self._unclean()
        if self.dirty is not None:
            if self._parts is not None:
                print(f"shared cluster: rebuilding ({self.dirty})")
            self.close()
            self._build()
        assert self._parts is not None
        api, kubelet, plugin, nvml, hook, _sock, api_client = self._parts
        return Cluster(
            api, kubelet, plugin, nvml, hook, k8s.CoreV1Api(api_client), Admitter(kubelet, rng=random.Random(0))
        )

    def restart_plugin(self) -> PluginProcess:
        """The DaemonSet's restart after the plugin exited: a new process, same kubelet, node, config and env."""
        assert self._parts is not None
        api, kubelet, old, nvml, hook, sock_dir, api_client = self._parts
        assert old.proc is not None and old.proc.poll() is not None, "the plugin is still running"
        old.terminate()  # already exited: only closes its log
        self.restarts += 1
        work = old.log_path.parent.with_name(f"plugin-restart{self.restarts}")
        work.mkdir()
        plugin = PluginProcess(work, sock_dir, nvml, env=self._plugin_env, node_name=NODE).start()
        self._parts = (api, kubelet, plugin, nvml, hook, sock_dir, api_client)
        return plugin

    @property
    def plugin(self) -> PluginProcess:
        assert self._parts is not None
        return self._parts[2]
