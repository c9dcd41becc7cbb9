"""`vgpu inspect node NAME` / `pod NS/NAME` as a real process against the simulated cluster."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import subprocess_env
from vgpu.sim.kubelet.admission import pod_manifest

from .conftest import CORES, MEMORY, NODE, NUMBER, UUID0, UUID1


def inspect(cluster, tmp_path, *args: str) -> subprocess.CompletedProcess:
    kubeconfig = cluster.api.kubeconfig(tmp_path / "inspect-kubeconfig")
    return subprocess.run(
        [sys.executable, "-m", "vgpu", "inspect", "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env({}),
    )


def test_inspect_live_node_and_pod(cluster, tmp_path):
    cluster.create_pod(
        pod_manifest(
            "p",
            [
                {"name": "side"},
                {"name": "c1", "limits": {NUMBER: 2, MEMORY: 3000, CORES: 30}},
                {"name": "c2", "limits": {NUMBER: 1, MEMORY: 2000}},
            ],
        )
    )
    cluster.scheduler("master").schedule_once()
    before = inspect(cluster, tmp_path, "pod", "default/p")
    assert before.returncode == 0, before.stderr
    assert "bind-phase: allocating" in before.stdout
    assert cluster.admit("p").admitted
    node = inspect(cluster, tmp_path, "node", NODE)
    assert node.returncode == 0, node.stderr
    lines = node.stdout.splitlines()
    gpu0 = next(ln for ln in lines if UUID0 in ln)
    gpu1 = next(ln for ln in lines if UUID1 in ln)
    assert "1/10" in gpu0 and "3000/81920" in gpu0 and "30/100" in gpu0 and "healthy" in gpu0
    assert "2/10" in gpu1 and "5000/81920" in gpu1 and "30/100" in gpu1
    assert "Handshake: Reported by the plugin" in node.stdout
    pod = inspect(cluster, tmp_path, "--json", "pod", "default/p")
    rep = json.loads(pod.stdout)
    assert rep["bind_phase"] == "success" and rep["vgpu_time"] == "18446744073709551615"
    assert [(c["container"], c["served"], len(c["devices"])) for c in rep["containers"]] == [
        ("c1", True, 2),
        ("c2", True, 1),
    ]


def test_inspect_missing_objects_exit_1(cluster, tmp_path):
    r = inspect(cluster, tmp_path, "pod", "default/nope")
    assert r.returncode == 1 and "HTTP 404" in r.stderr
    assert inspect(cluster, tmp_path, "pod", "nope").returncode == 2


def _inspect_value(value: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vgpu", "inspect", "--", value],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env({}),
    )


def test_inspect_vgpu_times_without_a_calendar_date_print_one_line():
    """A valid uint64 ``vgpu-time`` past year 9999 ended in a traceback (timestamp out of range)."""
    for value in ("18446744073709551614", "253402300800"):
        r = _inspect_value(value)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert (
            r.stdout
            == f"volcano.sh/vgpu-time: {value} s after the epoch (after 9999-12-31T23:59:59Z: no calendar date)\n"
        )
    r = _inspect_value("253402300799")
    assert (r.returncode, r.stdout) == (0, "volcano.sh/vgpu-time: 9999-12-31T23:59:59+00:00\n")
    r = _inspect_value("Reported 2026-01-02 03:04:05 +9900 UTC")  # timezone() raised ValueError
    assert r.returncode == 0 and "zone offset out of range" in r.stdout and r.stdout.count("\n") == 1


def test_inspect_values_that_do_not_decode_exit_1_with_one_line():
    for value in ("18446744073709551616", "9" * 5000, "２０２６"):
        r = _inspect_value(value)
        assert r.returncode == 1 and r.stdout == "", (value[:40], r.stdout, r.stderr)
        assert r.stderr.startswith("vgpu inspect: ") and r.stderr.count("\n") == 1 and len(r.stderr) < 300, r.stderr
        assert "Traceback" not in r.stderr
