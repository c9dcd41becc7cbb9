"""Startup of the real daemons against the import time of their modules, and `vgpu --help`.

Startup: from spawning ``python -m vgpu plugin`` until the fake kubelet has all three resources
registered and listed (fake NVML with 8 GPUs, simulated API server), and from spawning
``python -m vgpu monitor`` until its log names the port it serves.  Import: a fresh
``python -c "import vgpu.plugin.daemon"`` (``vgpu.monitor.daemon``).  The two are timed in turn,
so machine load hits both.  Gates: ``startup.plugin_vs_import`` and ``startup.monitor_vs_import``
(import / startup) and ``startup.help`` (wall time of ``vgpu --help``).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.conftest import QUICK, assert_gates, record_gate
from benchmarks.daemons import Daemon
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.nvml import fakenvml
from vgpu.sim.processes import MonitorProcess

NUMBER, MEMORY, CORES = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"


def _import_time(module: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
    return time.perf_counter() - t0


def test_daemon_startup_against_import_time_and_help(benchmark, tmp_path):
    n = 3 if QUICK else 7
    api = ApiServer().start()
    sock_dir = tempfile.mkdtemp(prefix="vgpu-st-", dir="/tmp")  # unix socket paths: <= 107 bytes
    try:
        api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
        nvml = fakenvml.FakeNvml.create(tmp_path / "nvml", [fakenvml.device(i) for i in range(8)])
        hook = tmp_path / "hook"
        hook.mkdir()
        (hook / "libvgpu.so").write_bytes(b"\x7fELF fake libvgpu for benchmarks\n")
        (tmp_path / "dc.yaml").write_text("nvidia:\n  deviceSplitCount: 10\n  gpuMemoryFactor: 10\n")
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
        plugin_s, plugin_imp, mon_s, mon_imp, help_s = [], [], [], [], []
        for k in range(n):
            kubelet = FakeKubelet(sock_dir).start()
            try:
                t0 = time.perf_counter()
                p = Daemon(
                    ["plugin", "--node-name", "node-1", "--kubelet-socket", f"{sock_dir}/kubelet.sock",
                     "--device-config", str(tmp_path / "dc.yaml"), "--node-config", str(tmp_path / "none.json"),
                     "--metrics-listen", "127.0.0.1:0"],
                    {**nvml.env, "KUBECONFIG": str(kubeconfig), "HOOK_PATH": str(hook)},
                    tmp_path / f"plugin-{k}.log",
                ).start()  # fmt: skip
                try:
                    kubelet.wait_for_plugins((NUMBER, MEMORY, CORES), timeout=60)
                    plugin_s.append(time.perf_counter() - t0)
                finally:
                    p.stop()
            finally:
                kubelet.stop()
            plugin_imp.append(_import_time("vgpu.plugin.daemon"))
            t0 = time.perf_counter()
            m = MonitorProcess(tmp_path, hook, kubeconfig, nvml_env=nvml.env)
            try:
                m.start(timeout=60)  # returns once the log names the bound port
                mon_s.append(time.perf_counter() - t0)
            finally:
                m.terminate()
            mon_imp.append(_import_time("vgpu.monitor.daemon"))
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "vgpu", "--help"], check=True, capture_output=True)
            help_s.append(time.perf_counter() - t0)
            assert b"plugin" in out.stdout
    finally:
        api.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in
           {"plugin": plugin_s, "plugin_import": plugin_imp, "monitor": mon_s, "monitor_import": mon_imp,
            "help": help_s}.items()}  # fmt: skip
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info.update({f"{k}_s": v for k, v in med.items()})
    print(
        f"\nplugin startup {med['plugin']:.2f} s (import {med['plugin_import']:.2f} s), monitor startup "
        f"{med['monitor']:.2f} s (import {med['monitor_import']:.2f} s), vgpu --help {med['help']:.2f} s"
    )
    assert_gates(
        record_gate("startup.plugin_vs_import", med["plugin_import"] / med["plugin"],
                    ours_median_s=med["plugin"], baseline_median_s=med["plugin_import"]),
        record_gate("startup.monitor_vs_import", med["monitor_import"] / med["monitor"],
                    ours_median_s=med["monitor"], baseline_median_s=med["monitor_import"]),
        record_gate("startup.help", med["help"] * 1e3),
    )  # fmt: skip
