"""Hostile configuration files against the real `vgpu plugin` process (docs/configuration.md §2.4).

At startup such a file exits 2 within seconds with one clear line; on SIGHUP it is logged and
ignored and the plugin keeps serving, its peak memory (``VmHWM``) unchanged by the attempt.
Before: the 1.3 KB alias file took 36 s and 5.5 GB to report its error (an OOM kill in the
512 MiB container), and a 5,000-digit integer ended in a traceback.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.unit.config.test_config_hostile import laughs

from .conftest import NAMES

CASES = {
    "aliases": (laughs(), "(file): not accepted: more than 100000 YAML nodes with its aliases expanded"),
    "digits": (f"nvidia:\n  deviceSplitCount: {'9' * 5000}\n", "nvidia.deviceSplitCount: must be between 1 and 1024"),
    "mig-count": (
        "nvidia:\n  knownMigGeometries:\n  - models: [A30]\n    allowedGeometries:\n    - group: g\n"
        "      geometries:\n      - {name: 1g.6gb, memory: 6144, count: 100000000000}\n",
        "geometries[0].count: must be <= 64 (got 100000000000)",
    ),
}


def _reload_failures(log: str) -> list[str]:
    return [line for line in log.splitlines() if "reload failed, keeping the previous configuration" in line]


def _vm_hwm_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize("case", sorted(CASES))
def test_startup_with_a_hostile_config_exits_2_at_once_with_one_line(two_gpus, plugin_factory, case):
    text, expected = CASES[case]
    start = time.monotonic()
    p = plugin_factory(two_gpus, device_config=text)
    assert p.wait_exit(30) == 2, p.log()[-2000:]
    elapsed = time.monotonic() - start
    log = p.log()
    errors = [line for line in log.splitlines() if "invalid configuration in" in line]
    assert len(errors) == 1 and expected in errors[0], log[-2000:]
    assert len(errors[0]) < 400 and "Traceback" not in log
    print(f"{case}: exit 2 after {elapsed:.2f} s (process start included)")
    assert elapsed < 15


def test_sighup_with_a_hostile_config_keeps_serving_and_memory(kubelet, two_gpus, plugin_factory, tmp_path):
    p = plugin_factory(two_gpus, device_config="nvidia:\n  deviceSplitCount: 4\n")
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    before = _vm_hwm_mib(p.pid)
    for case in sorted(CASES):
        text, expected = CASES[case]
        (tmp_path / "device-config.yaml").write_text(text)
        mark = len(_reload_failures(p.log()))
        p.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while len(failures := _reload_failures(p.log())) == mark:
            assert time.monotonic() < deadline, p.log()[-2000:]
            time.sleep(0.05)
        assert expected in failures[-1] and len(failures[-1]) < 500, failures[-1]
    assert p.proc.poll() is None and all(clients[n].stream_error is None for n in NAMES)
    assert clients[NAMES[0]].wait_until(lambda c: len(c.devices) == 8, 5)  # still the old config
    after = _vm_hwm_mib(p.pid)
    print(f"plugin VmHWM before {before} MiB, after three hostile reloads {after} MiB")
    assert after - before < 50
