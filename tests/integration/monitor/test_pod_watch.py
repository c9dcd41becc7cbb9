"""The monitor's pod index over the real node-scoped watch of vgpu.kube against the simulated API server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.monitor.helpers import wait_until
from vgpu.kube.client import KubeClient
from vgpu.monitor.pods import WatchedPods

from .conftest import create_pod, set_phase


@pytest.fixture
def watched(apiserver, kubeconfig) -> Iterator[WatchedPods]:
    client = KubeClient.from_kubeconfig(str(kubeconfig))
    pods = WatchedPods(client, "node-1").start()
    try:
        assert pods.wait_synced(10)
        yield pods
    finally:
        pods.stop()
        client.close()


def test_only_this_nodes_pods_by_uid_and_changes_follow(apiserver, watched):
    mine = create_pod(apiserver, "mine", containers=("a", "b"))
    other = create_pod(apiserver, "theirs", node="node-2")
    uid = mine["metadata"]["uid"]
    info = wait_until(lambda: watched.get(uid), 5, "the pod in the index")
    assert (info.namespace, info.name, info.containers, info.terminal) == ("default", "mine", {"a", "b"}, False)
    assert watched.get(other["metadata"]["uid"]) is None  # field selector spec.nodeName
    set_phase(apiserver, mine, "Failed")
    wait_until(lambda: watched.get(uid).terminal, 5, "the phase change")
    apiserver.store.delete("pods", "default", "mine")
    wait_until(lambda: watched.get(uid) is None, 5, "the deletion")


def test_index_survives_an_api_server_restart(apiserver, watched):
    before = create_pod(apiserver, "before")
    wait_until(lambda: watched.get(before["metadata"]["uid"]), 5, "first pod")
    port = apiserver.port
    apiserver.stop()
    assert watched.get(before["metadata"]["uid"]) is not None  # keeps serving its last state
    apiserver.start(port=port)
    after = create_pod(apiserver, "after")
    wait_until(lambda: watched.get(after["metadata"]["uid"]), 15, "a pod created after the restart")
    assert watched.synced
