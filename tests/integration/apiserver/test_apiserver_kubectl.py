"""The real kubectl against the simulated API server: outputs are parsed and checked."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest
import yaml

from tests.integration.apiserver.conftest import pod_body
from tests.support import programs

KUBECTL = programs.kubectl_path()


@pytest.fixture(autouse=True)
def _kubectl_present() -> None:
    if KUBECTL is None:
        programs.kubectl("the tests drive the real binary")


@pytest.fixture
def kubectl(apiserver, tmp_path: pathlib.Path):
    """Run kubectl with a private HOME (discovery cache) and a kubeconfig for the server."""
    config = apiserver.kubeconfig(tmp_path / "kubeconfig")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def run(*args: str, ok: bool = True, use_server_flag: bool = False) -> subprocess.CompletedProcess:
        target = [f"--server={apiserver.url}"] if use_server_flag else [f"--kubeconfig={config}"]
        proc = subprocess.run([KUBECTL, *target, *args], capture_output=True, text=True, env=env, timeout=60)
        if ok:
            assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {proc.stderr}"
        return proc

    return run


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def test_get_nodes_yaml_with_server_flag(apiserver, kubectl):
    apiserver.store.create(
        "nodes",
        {
            "metadata": {
                "name": "gpu-node",
                "annotations": {"volcano.sh/node-vgpu-register": "GPU-0,10,81920,100,NVIDIA-A100-SXM4-80GB,0,true:"},
            },
            "status": {"capacity": {"volcano.sh/vgpu-number": "10"}},
        },
    )
    out = kubectl("get", "nodes", "-o", "yaml", use_server_flag=True).stdout
    doc = yaml.safe_load(out)
    assert doc["kind"] == "List" and len(doc["items"]) == 1
    node = doc["items"][0]
    assert (node["apiVersion"], node["kind"], node["metadata"]["name"]) == ("v1", "Node", "gpu-node")
    assert node["metadata"]["annotations"]["volcano.sh/node-vgpu-register"].startswith("GPU-0,10,81920")
    assert node["status"]["capacity"] == {"volcano.sh/vgpu-number": "10"}
    assert (
        node["metadata"]["resourceVersion"]
        == apiserver.store.get("nodes", None, "gpu-node")["metadata"]["resourceVersion"]
    )


def test_annotate_pod_sends_a_merge_patch(apiserver, kubectl):
    apiserver.store.create("pods", pod_body("p1"))
    out = kubectl("annotate", "pod", "p1", "volcano.sh/bind-phase=success").stdout
    assert out.strip() == "pod/p1 annotated"
    assert apiserver.store.get("pods", "default", "p1")["metadata"]["annotations"] == {
        "volcano.sh/bind-phase": "success"
    }
    patch = apiserver.requests.writes("pods", "patch")[-1]
    assert patch.content_type == "application/merge-patch+json"
    kubectl("annotate", "pod", "p1", "volcano.sh/bind-phase-")  # removal: a null in the merge patch
    assert "annotations" not in apiserver.store.get("pods", "default", "p1")["metadata"]
    proc = kubectl("annotate", "pod", "missing", "a=b", ok=False)
    assert proc.returncode != 0 and 'pods "missing" not found' in proc.stderr


def test_get_pods_all_namespaces_prints_the_server_table(apiserver, kubectl):
    apiserver.store.create("pods", pod_body("web", "default"))
    apiserver.store.create("pods", pod_body("gpu", "team-a"))
    apiserver.store.bind("team-a", "gpu", "n1")
    rows = table(kubectl("get", "pods", "-A").stdout)
    assert rows[0] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [r[:5] for r in rows[1:]] == [
        ["default", "web", "0/1", "Pending", "0"],
        ["team-a", "gpu", "0/1", "Pending", "0"],
    ]
    wide = table(kubectl("get", "pods", "-n", "team-a", "-o", "wide").stdout)
    assert wide[0][:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert wide[1][0] == "gpu" and wide[1][6] == "n1"
    names = kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName=n1", "-o", "name").stdout.split()
    assert names == ["pod/gpu"]


def test_patch_node_all_types(apiserver, kubectl):
    apiserver.store.create("nodes", {"metadata": {"name": "n1"}})
    out = kubectl("patch", "node", "n1", "--type=merge", "-p", '{"metadata":{"labels":{"gpu":"on"}}}').stdout
    assert out.strip() == "node/n1 patched"
    kubectl("patch", "node", "n1", "-p", '{"metadata":{"annotations":{"volcano.sh/node-vgpu-handshake":"x"}}}')
    kubectl("patch", "node", "n1", "--type=json", "-p", '[{"op":"add","path":"/spec/unschedulable","value":true}]')
    node = apiserver.store.get("nodes", None, "n1")
    assert node["metadata"]["labels"] == {"gpu": "on"}
    assert node["metadata"]["annotations"] == {"volcano.sh/node-vgpu-handshake": "x"}
    assert node["spec"]["unschedulable"] is True
    types = [r.content_type for r in apiserver.requests.writes("nodes", "patch")]
    assert types == [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
    ]
    rows = table(kubectl("get", "nodes").stdout)
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert rows[1][:3] == ["n1", "Unknown,SchedulingDisabled", "<none>"]
    kubectl(
        "patch",
        "node",
        "n1",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"capacity":{"volcano.sh/vgpu-number":"10"}}}',
    )
    assert apiserver.store.get("nodes", None, "n1")["status"]["capacity"] == {"volcano.sh/vgpu-number": "10"}


def test_describe_pod_shows_node_annotations_and_events(apiserver, kubectl):
    pod = apiserver.store.create("pods", pod_body("gpu-pod"))
    apiserver.store.bind("default", "gpu-pod", "n1", {"volcano.sh/bind-phase": "failed"})
    apiserver.store.create(
        "events",
        {
            "metadata": {"name": "gpu-pod.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "gpu-pod", "namespace": "default", "uid": pod["metadata"]["uid"]},
            "reason": "UnexpectedAdmissionError",
            "message": "device annotation is malformed",
            "type": "Warning",
            "source": {"component": "vgpu-device-plugin"},
            "count": 1,
            "firstTimestamp": pod["metadata"]["creationTimestamp"],
            "lastTimestamp": pod["metadata"]["creationTimestamp"],
        },
    )
    out = kubectl("describe", "pod", "gpu-pod").stdout
    fields = {
        line.split(":", 1)[0]: line.split(":", 1)[1].strip()
        for line in out.splitlines()
        if ":" in line and not line.startswith(" ")
    }
    assert fields["Name"] == "gpu-pod" and fields["Namespace"] == "default"
    assert fields["Node"] == "n1/"  # NODE/HOST-IP; no kubelet has reported a hostIP
    assert fields["Status"] == "Pending"
    assert fields["Annotations"] == "volcano.sh/bind-phase: failed"
    events = out.split("Events:", 1)[1]
    assert "Warning  UnexpectedAdmissionError" in events
    assert "vgpu-device-plugin  device annotation is malformed" in events


def test_create_from_file_label_selector_and_delete(apiserver, kubectl, tmp_path):
    manifest = tmp_path / "pod.json"
    body = pod_body("from-file", labels={"app": "vgpu"})
    body["spec"]["containers"][0]["resources"] = {"limits": {"volcano.sh/vgpu-number": 2}}
    manifest.write_text(json.dumps(body))
    assert kubectl("create", "-f", str(manifest)).stdout.strip() == "pod/from-file created"
    stored = apiserver.store.get("pods", "default", "from-file")
    assert stored["spec"]["containers"][0]["resources"]["requests"] == {"volcano.sh/vgpu-number": "2"}
    assert kubectl("get", "pods", "-l", "app in (vgpu,other)", "-o", "name").stdout.split() == ["pod/from-file"]
    got = json.loads(kubectl("get", "pod", "from-file", "-o", "json").stdout)
    assert got["metadata"]["uid"] == stored["metadata"]["uid"]
    assert kubectl("delete", "pod", "from-file").stdout.strip() == 'pod "from-file" deleted'
    assert apiserver.store.try_get("pods", "default", "from-file") is None
    events = table(kubectl("get", "events", "-A").stdout)  # no events: kubectl prints to stderr
    assert events == []
