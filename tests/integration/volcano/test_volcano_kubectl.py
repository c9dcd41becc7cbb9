"""kubectl against the simulated API server, in the Volcano flow: the operator's view of what the
plugin registered, and a hand-made allocation (``kubectl annotate`` the scheduler's keys) that the
real plugin then serves."""

from __future__ import annotations

import pathlib
import subprocess

import pytest
import yaml

from tests.support import programs
from vgpu.protocol import encode_pod_devices, keys
from vgpu.protocol.pod_devices import ContainerDevice

from .conftest import MEMORY, NODE, NUMBER, UUID0, UUID1

KUBECTL = programs.kubectl_path()


@pytest.fixture(autouse=True)
def _kubectl_present() -> None:
    if KUBECTL is None:
        programs.kubectl("the tests drive the real binary")


def kubectl(cluster, tmp_path: pathlib.Path, *args: str, stdin: str | None = None) -> str:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [KUBECTL, f"--server={cluster.api.url}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def test_kubectl_get_nodes_yaml_shows_registration_and_resources(cluster, tmp_path):
    doc = yaml.safe_load(kubectl(cluster, tmp_path, "get", "nodes", "-o", "yaml"))
    node = next(n for n in doc["items"] if n["metadata"]["name"] == NODE)
    ann = node["metadata"]["annotations"]
    assert ann[keys.REGISTER] == cluster.node()["metadata"]["annotations"][keys.REGISTER]
    assert ann[keys.HANDSHAKE].startswith("Reported ") and ann[keys.HANDSHAKE].endswith(" +0000 UTC")
    assert node["status"]["allocatable"][NUMBER] == "20"


def test_kubectl_annotate_hand_made_allocation_is_served(cluster, tmp_path):
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "manual", "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {NUMBER: "2", MEMORY: "1500"}}}],
        },
    }
    assert "pod/manual created" in kubectl(cluster, tmp_path, "create", "-f", "-", stdin=yaml.safe_dump(manifest))
    devices = encode_pod_devices([[ContainerDevice(UUID0, 1500, 10), ContainerDevice(UUID1, 1500, 10)]])
    out = kubectl(
        cluster,
        tmp_path,
        "annotate",
        "pod",
        "manual",
        f"{keys.VGPU_NODE}={NODE}",
        f"{keys.VGPU_TIME}=1784884863",
        f"{keys.BIND_PHASE}=allocating",
        f"{keys.VGPU_IDS_NEW}={devices}",
        f"{keys.DEVICES_TO_ALLOCATE}={devices}",
    )
    assert out.strip() == "pod/manual annotated"
    res = cluster.admit("manual")
    assert res.admitted, res.error
    assert res.container("c").envs["CUDA_DEVICE_SM_LIMIT_1"] == "10"
    got = yaml.safe_load(kubectl(cluster, tmp_path, "get", "pod", "manual", "-o", "yaml"))
    assert got["metadata"]["annotations"][keys.BIND_PHASE] == "success"
    assert got["metadata"]["annotations"][keys.DEVICES_TO_ALLOCATE] == ""
