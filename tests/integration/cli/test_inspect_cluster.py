"""`vgpu inspect` against the simulated API server as a real process: it finds the cluster as
kubectl does, and explains a Pending pod from the scheduler emulator's Events and conditions."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from tests.support import programs
from vgpu.protocol import RegisterRecord, encode_register, keys
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.scheduler import VolcanoSchedulerEmulator

U0 = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
U1 = "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c"
A100 = "NVIDIA-NVIDIA A100-SXM4-80GB"


@pytest.fixture
def server() -> Iterator[ApiServer]:
    s = ApiServer().start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def api(server: ApiServer) -> Iterator[client.CoreV1Api]:
    c = server.api_client()
    try:
        yield client.CoreV1Api(c)
    finally:
        c.close()


def add_gpu_node(api: client.CoreV1Api, name: str = "gpu-node-1") -> None:
    reg = encode_register(
        [RegisterRecord(U0, 10, 81920, A100, True, "hami-core"), RegisterRecord(U1, 10, 81920, A100, True, "hami-core")]
    )
    api.create_node(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": {keys.REGISTER: reg}}}
    )
    alloc = {"volcano.sh/vgpu-number": "20", "volcano.sh/vgpu-memory": "163840", "volcano.sh/vgpu-cores": "200"}
    api.patch_node_status(name, {"status": {"allocatable": alloc, "capacity": alloc}})


def add_pod(api: client.CoreV1Api, name: str, memory: int) -> None:
    limits = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(memory)}
    api.create_namespaced_pod(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "cuda", "image": "busybox:1.36", "resources": {"limits": limits}}],
            },
        },
    )


def inspect(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    from vgpu.sim.processes import subprocess_env

    e = subprocess_env(env)
    for k in ("KUBECONFIG", "HOME"):
        if k not in env:
            e.pop(k, None)
    return subprocess.run(
        [sys.executable, "-m", "vgpu", "inspect", *args], capture_output=True, text=True, env=e, timeout=60
    )


def test_inspect_finds_the_cluster_as_kubectl_does(server, api, tmp_path):
    add_gpu_node(api)
    real = server.kubeconfig(tmp_path / "real" / "config")
    home = tmp_path / "home"
    # ~/.kube/config
    server.kubeconfig(home / ".kube" / "config")
    out = inspect("node", "gpu-node-1", env={"HOME": str(home)})
    assert out.returncode == 0, out.stderr
    assert "Node gpu-node-1" in out.stdout and U0 in out.stdout
    # KUBECONFIG wins over ~/.kube/config; a list is merged and a missing member is skipped
    broken_home = tmp_path / "home2"
    (broken_home / ".kube").mkdir(parents=True)
    (broken_home / ".kube" / "config").write_text("not: [valid")
    kc = f"{tmp_path / 'missing'}:{real}"
    out = inspect("node", "gpu-node-1", env={"HOME": str(broken_home), "KUBECONFIG": kc})
    assert out.returncode == 0, out.stderr
    # without KUBECONFIG the broken ~/.kube/config is the one used, and named
    out = inspect("node", "gpu-node-1", env={"HOME": str(broken_home)})
    assert out.returncode == 2
    assert "(from ~/.kube/config)" in out.stderr and "not valid YAML" in out.stderr
    # --kubeconfig wins over both
    out = inspect("--kubeconfig", str(real), "node", "gpu-node-1", env={"HOME": str(broken_home), "KUBECONFIG": "/x"})
    assert out.returncode == 0, out.stderr
    # --context: a second context in a merged list, pointing nowhere, is chosen by name
    other = tmp_path / "other"
    doc = yaml.safe_load(real.read_text())
    doc["clusters"] = [{"name": "dead", "cluster": {"server": "http://127.0.0.1:1"}}]
    doc["contexts"] = [{"name": "dead", "context": {"cluster": "dead", "user": "vgpu-sim"}}]
    doc["current-context"] = "dead"
    other.write_text(yaml.safe_dump(doc))
    merged = f"{real}:{other}"
    assert inspect("--context", "vgpu-sim", "node", "gpu-node-1", env={"KUBECONFIG": merged}).returncode == 0
    dead = inspect("--context", "dead", "node", "gpu-node-1", env={"KUBECONFIG": merged})
    assert dead.returncode == 1 and "unreachable" in dead.stderr
    # nothing at all: one line saying what was tried
    out = inspect("node", "gpu-node-1", env={"HOME": str(tmp_path / "empty")})
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "vgpu inspect: no cluster found: no --kubeconfig, no KUBECONFIG, no ~/.kube/config and not running in a pod"
    )


def test_pending_pod_is_explained(server, api, tmp_path):
    add_gpu_node(api)
    add_pod(api, "oversized", 204800)
    add_pod(api, "fits", 8000)
    sched = VolcanoSchedulerEmulator(api)
    for _ in range(3):  # repeated cycles: one Event, not one per cycle (Volcano writes on a change)
        sched.schedule_once()
    events = api.list_namespaced_event("default", field_selector="involvedObject.name=oversized").items
    assert [e.reason for e in events] == ["FailedScheduling"]
    message = events[0].message
    assert message.startswith("0/1 nodes are unavailable: 1 ") and message.endswith(".")
    pod = api.read_namespaced_pod("oversized", "default")
    cond = [c for c in pod.status.conditions or [] if c.type == "PodScheduled"]
    assert [(c.status, c.reason, c.message) for c in cond] == [("False", "Unschedulable", message)]
    assert api.read_namespaced_pod("fits", "default").spec.node_name == "gpu-node-1"

    kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
    out = inspect("pod", "default/oversized", env={"KUBECONFIG": str(kubeconfig)})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "State: Pending, not bound to a node" in text
    assert f"Condition PodScheduled=False (Unschedulable): {message}" in text
    assert f"Warning FailedScheduling from volcano: {message}" in text
    assert "Request: cuda: 1 GPU(s) with 204800 MiB and 0 % cores each" in text
    assert "gpu-node-1: does not fit: container cuda: 0 of 1 GPU(s) have room; most free memory 81920 MiB" in text
    assert "no node has room" in text
    js = inspect("--json", "pod", "default/oversized", env={"KUBECONFIG": str(kubeconfig)})
    import json

    doc = json.loads(js.stdout)
    assert doc["explanation"]["events"][0]["reason"] == "FailedScheduling"
    assert doc["explanation"]["fits"][0]["fits"] is False


def test_kubectl_describe_shows_the_scheduler_event_and_condition(server, api, tmp_path):
    kubectl = programs.kubectl("`kubectl describe` is what a user would run")
    add_gpu_node(api)
    add_pod(api, "oversized", 204800)
    VolcanoSchedulerEmulator(api).schedule_once()
    kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
    out = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), "describe", "pod", "oversized"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    flat = " ".join(out.stdout.split())
    assert "PodScheduled False" in flat
    assert "Warning FailedScheduling" in flat and "volcano" in flat
    assert "0/1 nodes are unavailable: 1 not enough gpu fitted on this node." in flat
