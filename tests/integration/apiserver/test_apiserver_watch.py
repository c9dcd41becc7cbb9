"""Watches through ``kubernetes.watch.Watch().stream`` against the simulated API server."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.apiserver.conftest import WatchStream, pod_body
from vgpu.sim.apiserver import ApiServer


def watching(server: ApiServer, resource: str, n: int = 1) -> None:
    server.store.wait_for(lambda s: s.watch_count(resource) >= n, timeout=5, what=f"{n} watch(es) on {resource}")


def test_node_field_selector_sees_added_modified_deleted(apiserver, core, streams):
    stream = WatchStream(core.list_namespaced_pod, namespace="default", field_selector="spec.nodeName=n1")
    streams.append(stream)
    watching(apiserver, "pods")
    core.create_namespaced_pod("default", pod_body("elsewhere"))
    core.create_namespaced_pod("default", pod_body("gpu"))
    apiserver.store.bind("default", "elsewhere", "n2")
    apiserver.store.bind("default", "gpu", "n1", {"volcano.sh/bind-phase": "allocating"})
    core.patch_namespaced_pod("gpu", "default", {"metadata": {"annotations": {"volcano.sh/bind-phase": "success"}}})
    core.delete_namespaced_pod("gpu", "default")

    added = stream.next_event()
    assert added["type"] == "ADDED"  # the pod enters the selector when it is bound
    assert added["object"].metadata.name == "gpu" and added["object"].spec.node_name == "n1"
    assert added["object"].metadata.annotations == {"volcano.sh/bind-phase": "allocating"}
    modified = stream.next_event()
    assert modified["type"] == "MODIFIED"
    assert modified["object"].metadata.annotations == {"volcano.sh/bind-phase": "success"}
    deleted = stream.next_event()
    assert deleted["type"] == "DELETED" and deleted["object"].metadata.name == "gpu"
    assert int(deleted["object"].metadata.resource_version) == apiserver.store.resource_version


def test_initial_state_then_changes(apiserver, core, streams):
    core.create_namespaced_pod("default", pod_body("a"))
    stream = WatchStream(core.list_namespaced_pod, namespace="default")
    streams.append(stream)
    first = stream.next_event()
    assert (first["type"], first["object"].metadata.name) == ("ADDED", "a")
    core.create_namespaced_pod("default", pod_body("b"))
    second = stream.next_event()
    assert (second["type"], second["object"].metadata.name) == ("ADDED", "b")


def test_resume_from_resource_version(apiserver, core, streams):
    core.create_namespaced_pod("default", pod_body("a"))
    since = core.list_namespaced_pod("default").metadata.resource_version
    core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"v": "2"}}})
    core.create_namespaced_pod("default", pod_body("b"))
    core.delete_namespaced_pod("a", "default")
    stream = WatchStream(core.list_namespaced_pod, namespace="default", resource_version=since, timeout_seconds=2)
    streams.append(stream)
    got = [(e["type"], e["object"].metadata.name) for e in (stream.next_event() for _ in range(3))]
    assert got == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    assert stream.next(timeout=5) is WatchStream.END  # timeoutSeconds ends the stream, nothing else came


def test_too_old_resource_version_is_410(streams):
    server = ApiServer(history_size=5).start()
    api_client = server.api_client()
    try:
        api = client.CoreV1Api(api_client)
        api.create_namespaced_pod("default", pod_body("a"))
        since = api.list_namespaced_pod("default").metadata.resource_version
        for i in range(10):
            api.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"i": str(i)}}})
        stream = WatchStream(api.list_namespaced_pod, namespace="default", resource_version=since)
        streams.append(stream)
        outcome = stream.next(timeout=5)
        assert isinstance(outcome, ApiException) and outcome.status == 410
        assert "too old resource version" in outcome.reason
        # the client retried once before giving up, as it does against a real server
        assert len(server.requests.requests("watch", "pods")) == 2
    finally:
        api_client.close()
        server.stop()


def test_bookmarks_carry_the_current_version(apiserver, core, streams):
    core.create_namespaced_pod("default", pod_body("a"))
    stream = WatchStream(
        core.list_namespaced_pod,
        namespace="default",
        allow_watch_bookmarks=True,
        resource_version=core.list_namespaced_pod("default").metadata.resource_version,
    )
    streams.append(stream)
    bookmark = stream.next_event(skip_bookmarks=False)
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["raw_object"]["kind"] == "Pod"
    assert bookmark["raw_object"]["metadata"]["resourceVersion"] == str(apiserver.store.resource_version)
    assert stream.watch.resource_version == str(apiserver.store.resource_version)


def test_stop_ends_open_watches_promptly(apiserver, core, streams):
    stream = WatchStream(core.list_node)
    streams.append(stream)
    watching(apiserver, "nodes")
    t0 = time.monotonic()
    apiserver.stop()
    outcome = stream.next(timeout=5)
    assert isinstance(outcome, Exception), outcome  # the connection went away under the client
    assert time.monotonic() - t0 < 3


def test_dropped_watch_is_resumed_by_the_client_from_its_last_version(apiserver, core, streams):
    core.create_node({"metadata": {"name": "n1"}})
    stream = WatchStream(core.list_node)
    streams.append(stream)
    assert stream.next_event()["object"].metadata.name == "n1"
    watching(apiserver, "nodes")
    last = str(apiserver.store.resource_version)
    assert apiserver.drop_watches() == 1
    watching(apiserver, "nodes")  # the client re-watched on its own
    core.patch_node("n1", {"metadata": {"labels": {"a": "b"}}})
    event = stream.next_event()
    assert event["type"] == "MODIFIED" and event["object"].metadata.labels == {"a": "b"}
    watches = apiserver.requests.requests("watch", "nodes")
    assert len(watches) == 2
    assert urllib.parse.parse_qs(watches[1].query)["resourceVersion"] == [last]


def test_abrupt_drop_breaks_the_stream(apiserver, core, streams):
    stream = WatchStream(core.list_node, timeout_seconds=30)
    streams.append(stream)
    watching(apiserver, "nodes")
    apiserver.drop_watches(abrupt=True)
    outcome = stream.next(timeout=5)
    assert isinstance(outcome, urllib3.exceptions.ProtocolError), outcome


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/watch/namespaces/default/pods/a",
        "/api/v1/namespaces/default/pods?watch=1&fieldSelector=metadata.name%3Da",
    ],
)
def test_single_object_watch_paths(apiserver, core, path):
    core.create_namespaced_pod("default", pod_body("a"))
    core.create_namespaced_pod("default", pod_body("b"))
    conn = http.client.HTTPConnection(apiserver.host, apiserver.port, timeout=5)
    try:
        sep = "&" if "?" in path else "?"
        conn.request("GET", f"{path}{sep}timeoutSeconds=1")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("Transfer-Encoding") == "chunked"
        lines = [json.loads(line) for line in resp.read().splitlines() if line]
    finally:
        conn.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "a")]
    assert lines[0]["object"]["kind"] == "Pod" and lines[0]["object"]["apiVersion"] == "v1"
