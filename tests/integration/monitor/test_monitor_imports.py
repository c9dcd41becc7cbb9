"""The real `vgpu monitor` process never loads the simulators (`vgpu.sim`) or the other subcommands.

The process (the real ``vgpu.cli.main``, see tests/support/imports.py) runs against the fake
NVML and the simulated API server, serves a scrape and stops on SIGTERM; at exit it writes its
``sys.modules``.
"""

from __future__ import annotations

from tests.support.imports import loaded_modules, under, vgpu_with_module_dump
from vgpu.sim.processes import MonitorProcess

from .conftest import create_pod


def test_monitor_process_imports_no_simulator(tmp_path, apiserver, kubeconfig, hook, nvml):
    dump = tmp_path / "modules.txt"
    create_pod(apiserver, "p")
    mon = MonitorProcess(tmp_path, hook, kubeconfig, nvml_env=nvml.env)
    mon.args = vgpu_with_module_dump(mon.args, dump)
    try:
        mon.start()
        assert b"hami_" in mon.scrape()
        assert mon.terminate() == 0
    finally:
        mon.terminate()
        print(f"--- monitor log ---\n{mon.log()[-6000:]}")
    modules = loaded_modules(dump)
    assert {"vgpu.cli.monitor", "vgpu.monitor.daemon", "vgpu.httpserve"} <= modules
    assert under(modules, "vgpu.sim", "vgpu.cli.plugin", "vgpu.cli.inspect", "vgpu.cli.demo") == []
