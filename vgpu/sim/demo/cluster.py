"""The simulated cluster of `vgpu demo`: one API server, and per node a fake NVML, a fake kubelet,
a real ``vgpu plugin`` and a real ``vgpu monitor`` process; plus the Volcano scheduler emulator.

Everything lives under one temp directory (sockets, HOOK_PATH, configs, logs) that
:meth:`DemoCluster.close` removes after every child has exited.  The kubelet's jobs that our
processes can observe are played here: registering the Node object, copying the device
plugins' healthy counts into ``status.allocatable`` (its status loop), and pod admission
(:class:`vgpu.sim.kubelet.admission.Admitter`).

One deviation from "everything in the temp dir": Allocate creates ``/tmp/vgpulock`` (the fixed
HAMi-core lock directory, docs/hami-core.md §2) if it is missing, exactly as on a real node; it is
shared by every HAMi-core user of the machine, so the demo leaves it in place.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import random
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client as k8s

from vgpu.config.mig_defaults import geometries_as_data
from vgpu.config.model import DEFAULT_MEMORY_PERCENTAGE_NAME
from vgpu.protocol import keys
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.demo.children import ChildProcess, ComponentFailed, child_env
from vgpu.sim.demo.options import DemoOptions, NodeSpec
from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.kubelet.admission import Admitter, node_status_from_kubelet, update_node_resources
from vgpu.sim.nvml import fakenvml
from vgpu.sim.nvml.cdi_spec import write_spec
from vgpu.sim.scheduler import VolcanoSchedulerEmulator
from vgpu.sim.scheduler.model import SchedulerConfig
from vgpu.sim.scheduler.shipped import shipped_scheduler_config

log = logging.getLogger(__name__)

RESOURCES = ("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")
STARTUP_TIMEOUT_S = 60.0
SCHEDULER_INTERVAL_S = 0.2
STATUS_LOOP_S = 0.5
_MAX_SOCKET_DIR = 60  # unix socket paths are limited to 107 bytes
# A placeholder for HAMi-core's libvgpu.so: the plugin only checks that it is a regular file.
LIBVGPU_PLACEHOLDER = b"\x7fELF placeholder libvgpu.so written by vgpu demo (no CUDA here)\n"


def make_workdir() -> pathlib.Path:
    """The demo's temp dir; under /tmp when $TMPDIR is too long for the socket paths."""
    base = tempfile.gettempdir()
    if len(base) > _MAX_SOCKET_DIR - 40:
        base = "/tmp"
    return pathlib.Path(tempfile.mkdtemp(prefix="vgpu-demo-", dir=base))


@dataclass
class DemoNode:
    """Everything one simulated GPU node runs."""

    spec: NodeSpec
    dir: pathlib.Path
    nvml: fakenvml.FakeNvml
    kubelet: FakeKubelet
    hook_path: pathlib.Path
    device_config: pathlib.Path
    node_config: pathlib.Path
    plugin: ChildProcess
    monitor: ChildProcess
    admitter: Admitter
    metrics_url: str = ""
    allocatable: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def children(self) -> list[ChildProcess]:
        return [self.plugin, self.monitor]

    @property
    def socket_dir(self) -> str:
        return self.kubelet.socket_dir


def node_object(spec: NodeSpec) -> dict[str, Any]:
    """The Node a kubelet registers (the plugin only patches annotations onto it)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": {"kubernetes.io/hostname": spec.name, "nvidia.com/gpu.present": "true"},
        },
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def fake_devices(spec: NodeSpec) -> list[dict[str, Any]]:
    return [
        fakenvml.device(i, name=g.name, memory_total_mib=g.memory_mib, uuid=g.uuid) for i, g in enumerate(spec.gpus)
    ]


def device_config_text() -> str:
    """The cluster-wide device-config.yaml both the plugin and the scheduler use (built-in values,
    written out so a reader sees the file a real cluster would carry)."""
    return yaml.safe_dump(
        {
            "nvidia": {
                "resourceCountName": RESOURCES[0],
                "resourceMemoryName": RESOURCES[1],
                "resourceMemoryPercentageName": DEFAULT_MEMORY_PERCENTAGE_NAME,
                "resourceCoreName": RESOURCES[2],
                "deviceSplitCount": 10,
                "deviceCoreScaling": 1,
                "gpuMemoryFactor": 1,
                "knownMigGeometries": geometries_as_data(),
            }
        },
        sort_keys=False,
    )


def node_config_text(spec: NodeSpec) -> str:
    return json.dumps({"nodeconfig": [{"name": spec.name, "operatingmode": spec.mode}]}, indent=1)


class DemoCluster:
    """Start with :meth:`start`; always :meth:`close` (idempotent, also after a failed start)."""

    def __init__(self, options: DemoOptions, *, seed: int = 0) -> None:
        self.options = options
        self.workdir = make_workdir()
        self.api = ApiServer(bookmark_interval=1.0)
        self.nodes: list[DemoNode] = []
        self.scheduler: VolcanoSchedulerEmulator | None = None
        self._api_client: Any = None
        self.core: k8s.CoreV1Api | None = None
        self.kubeconfig = self.workdir / "kubeconfig"
        self._seed = seed
        self._status_stop = threading.Event()
        self._status_thread: threading.Thread | None = None
        self._status_lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------ startup

    def start(self) -> None:
        self.api.start()
        self.api.kubeconfig(self.kubeconfig)
        self._api_client = self.api.api_client()
        self.core = k8s.CoreV1Api(self._api_client)
        dc = self.workdir / "device-config.yaml"
        dc.write_text(device_config_text())
        for spec in self.options.nodes:
            self.nodes.append(self._make_node(spec, dc))
        for node in self.nodes:  # all children boot in parallel
            node.plugin.start()
            node.monitor.start()

    def _make_node(self, spec: NodeSpec, device_config: pathlib.Path) -> DemoNode:
        d = self.workdir / spec.name
        (d / "kubelet").mkdir(parents=True)
        hook = d / "hook"
        hook.mkdir()
        (hook / "libvgpu.so").write_bytes(LIBVGPU_PLACEHOLDER)
        nc = d / "config.json"
        nc.write_text(node_config_text(spec))
        nvml = fakenvml.FakeNvml.create(d / "nvml", fake_devices(spec))
        self.api.store.create("nodes", node_object(spec))
        kubelet = FakeKubelet(str(d / "kubelet")).start()
        env = child_env(nvml.env)
        env["DEVICE_LIST_STRATEGY"] = self.options.device_list_strategy
        if self.options.uses_cdi:  # the node's CDI spec, as the toolkit's refresh unit writes it
            env["CDI_SPEC_DIRS"] = str(write_spec(nvml, d / "cdi").parent)
        common = [
            "--node-name",
            spec.name,
            "--kubeconfig",
            str(self.kubeconfig),
            "--hook-path",
            str(hook),
            "--nvml-library",
            str(nvml.library),
            "--device-config",
            str(device_config),
        ]
        plugin = ChildProcess(
            f"vgpu plugin ({spec.name})",
            [
                "--log-level",
                "INFO",
                "plugin",
                *common,
                "--node-config",
                str(nc),
                "--kubelet-socket",
                os.path.join(kubelet.socket_dir, "kubelet.sock"),
                "--metrics-listen",
                "127.0.0.1:0",  # two nodes on one machine: each plugin on a port of its own
                "--unhealthy-gpu-policy",
                "report",  # the demo shows the unhealthy GPU's health=false record
            ],
            env,
            d / "plugin.log",
        )
        monitor = ChildProcess(
            f"vgpu monitor ({spec.name})",
            ["--log-level", "INFO", "monitor", *common, "--listen", "127.0.0.1:0"],
            env,
            d / "monitor.log",
        )
        admitter = Admitter(kubelet, rng=random.Random(self._seed))
        return DemoNode(spec, d, nvml, kubelet, hook, device_config, nc, plugin, monitor, admitter)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        """Plugins registered with their kubelet and the Node carries their annotations; monitors serve."""
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            self._wait_plugins(node, deadline)
            self.sync_node_status()
            self._wait_register(node, deadline)
            m = node.monitor.wait_for_log(
                r"serving metrics on (http://\S+/metrics)", max(1.0, deadline - time.monotonic())
            )
            node.metrics_url = m.group(1)
        self._status_thread = threading.Thread(target=self._status_loop, name="demo-kubelet-status", daemon=True)
        self._status_thread.start()

    def _wait_plugins(self, node: DemoNode, deadline: float) -> None:
        while True:
            self.check_children()
            try:
                node.kubelet.wait_for_plugins(RESOURCES, timeout=0.2)
                return
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise ComponentFailed(
                        f"{node.plugin.name} did not register its three resources with the "
                        f"kubelet in time:\n{node.plugin.log_tail()}"
                    ) from None

    def _wait_register(self, node: DemoNode, deadline: float) -> None:
        while True:
            self.check_children()
            ann = self.node_annotations(node.name)
            if ann.get(keys.REGISTER) and (ann.get(keys.HANDSHAKE) or not self.scheduler_handshake):
                return
            if time.monotonic() > deadline:
                raise ComponentFailed(
                    f"{node.plugin.name} did not annotate Node {node.name} in time:\n{node.plugin.log_tail()}"
                )
            time.sleep(0.05)

    @property
    def scheduler_handshake(self) -> bool:
        return SchedulerConfig(version=self.options.volcano_version).switches.handshake

    def start_scheduler(self, timeout: float = 30.0) -> VolcanoSchedulerEmulator:
        """Start the emulator and wait until it uses every node (handshake / allocatable rule)."""
        assert self.core is not None
        # The shipped scheduler configuration (weight, resource names), the policy from --policy.
        cfg = shipped_scheduler_config(self.options.volcano_version, policy=self.options.scheduler_policy)
        self.scheduler = VolcanoSchedulerEmulator(self.core, cfg)
        self.scheduler.start(interval=SCHEDULER_INTERVAL_S)
        deadline = time.monotonic() + timeout
        want = {n.name for n in self.nodes}
        while not want <= set(self.scheduler.core.nodes):
            self.check_children()
            if time.monotonic() > deadline:
                missing = sorted(want - set(self.scheduler.core.nodes))
                raise ComponentFailed(
                    f"the scheduler emulator does not use node(s) {', '.join(missing)}: "
                    f"{self.scheduler.core.node_reasons}"
                )
            time.sleep(0.05)
        return self.scheduler

    # ------------------------------------------------------------------ the kubelet's status loop

    def sync_node_status(self) -> dict[str, dict[str, str]]:
        """Copy each kubelet's healthy device counts into its Node (only when they changed)."""
        changed = {}
        with self._status_lock:
            for node in self.nodes:
                status = node_status_from_kubelet(node.kubelet, RESOURCES)
                if status != node.allocatable:
                    update_node_resources(self.api.store, node.name, status)
                    node.allocatable = status
                    changed[node.name] = status
        return changed

    def _status_loop(self) -> None:
        while not self._status_stop.wait(STATUS_LOOP_S):
            try:
                self.sync_node_status()
            except Exception:  # the API server is stopping, or a transient error: next round
                log.debug("node status sync failed", exc_info=True)

    # ------------------------------------------------------------------ observing

    def node(self, name: str) -> DemoNode:
        return next(n for n in self.nodes if n.name == name)

    def node_annotations(self, name: str) -> dict[str, str]:
        obj = self.api.store.try_get("nodes", None, name) or {}
        return dict((obj.get("metadata") or {}).get("annotations") or {})

    def check_children(self) -> None:
        """Raise :class:`ComponentFailed` when a child ended without being asked to."""
        for node in self.nodes:
            for child in node.children:
                if child.proc is not None and child.failed:
                    raise ComponentFailed(
                        f"{child.name} exited unexpectedly with status {child.exit_code}:\n{child.log_tail()}"
                    )

    def descendants(self) -> list[int]:
        return [c.pid for n in self.nodes for c in n.children if c.pid is not None]

    # ------------------------------------------------------------------ teardown

    def close(self, *, force: bool = False) -> list[str]:
        """Stop everything (scheduler, children, kubelets, API server) and remove the temp dir.

        Returns one line per component that did not stop cleanly (empty when all did).
        """
        if self._closed:
            return []
        self._closed = True
        problems: list[str] = []
        if self.scheduler is not None:
            try:
                self.scheduler.stop()
            except RuntimeError as exc:
                problems.append(str(exc))
        self._status_stop.set()
        self._status_stop.set()
        # The kubelets go first: their ListAndWatch streams end from our side, not with a GOAWAY.
        for node in self.nodes:
            node.kubelet.stop()
        children = [c for n in self.nodes for c in n.children if c.proc is not None]
        ended_early = {c.name: c.exit_code for c in children if c.failed}
        for c in children:
            if force:
                c.kill_now()
            else:
                c.signal_stop()
        for c in children:
            code = c.wait_stopped()
            if c.name in ended_early:
                problems.append(f"{c.name} had exited on its own with status {ended_early[c.name]}")
            elif code not in (0, None, -signal.SIGTERM) and not force:
                # -SIGTERM: stopped before it had installed its handler (an early Ctrl-C) — still clean.
                problems.append(f"{c.name} exited with status {code} when stopped:\n{c.log_tail()}")
        if self._status_thread is not None:
            self._status_thread.join(5)
        if self._api_client is not None:
            self._api_client.close()
        self.api.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
        return problems
