"""The real `vgpu plugin` process never loads the simulators (`vgpu.sim`), the monitor or the other subcommands.

The process (the real ``vgpu.cli.main``, see tests/support/imports.py) runs against the fake
NVML and the fake kubelet, registers, reloads on SIGHUP and stops on SIGTERM; at exit it writes
its ``sys.modules``.
"""

from __future__ import annotations

import signal

from tests.support.imports import loaded_modules, under, vgpu_with_module_dump

from .conftest import NAMES, PluginProcess


def test_plugin_process_imports_no_simulator(tmp_path, socket_dir, kubelet, two_gpus):
    dump = tmp_path / "modules.txt"
    p = PluginProcess(tmp_path, socket_dir, two_gpus)
    p.args = vgpu_with_module_dump(p.args, dump)
    p.start()
    try:
        kubelet.wait_for_plugins(NAMES, timeout=30)
        assert p.wait_for_log("health checks running", 10)
        p.proc.send_signal(signal.SIGHUP)
        assert p.wait_for_log("SIGHUP: reloading configuration", 10)
        assert p.stop(10) == 0
    finally:
        p.stop(10)
        print(f"--- plugin log ---\n{p.log()[-6000:]}")
    modules = loaded_modules(dump)
    assert {"vgpu.cli.plugin", "vgpu.plugin.daemon", "vgpu.plugin.server"} <= modules
    assert under(modules, "vgpu.sim", "vgpu.monitor", "vgpu.cli.monitor", "vgpu.cli.inspect", "vgpu.cli.demo") == []
