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
