"""Fault hooks, the request ledger and restart-in-place, seen through real HTTP."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest
from kubernetes.client.rest import ApiException

from tests.integration.apiserver.conftest import pod_body


def test_next_patches_fail_then_succeed_and_are_counted(apiserver, core):
    core.create_node({"metadata": {"name": "n1"}})
    rule = apiserver.faults.fail("patch", "nodes", status=500, count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.patch_node("n1", {"metadata": {"annotations": {"a": "1"}}})
        assert err.value.status == 500
        body = json.loads(err.value.body)
        assert (body["reason"], body["message"]) == ("InternalError", "Internal error occurred: injected fault")
    core.patch_node("n1", {"metadata": {"annotations": {"a": "1"}}})
    assert rule.hits == 2 and rule not in apiserver.faults.rules
    assert apiserver.store.get("nodes", None, "n1")["metadata"]["annotations"] == {"a": "1"}

    counts = apiserver.requests.write_counts()
    assert counts[("nodes", "patch")] == 3 and counts[("nodes", "create")] == 1
    assert ("nodes", "get") not in counts
    ok = apiserver.requests.writes("nodes", "patch", ok_only=True)
    assert len(ok) == 1 and ok[0].name == "n1"
    assert ok[0].content_type == "application/strategic-merge-patch+json"
    assert json.loads(ok[0].body) == {"metadata": {"annotations": {"a": "1"}}}


def test_rules_match_subresources_names_and_globs(apiserver, core):
    core.create_namespaced_pod("default", pod_body("a"))
    core.create_namespaced_pod("default", pod_body("b"))
    apiserver.faults.fail("patch", "pods/status", status=409, name="a", count=None)
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod_status("a", "default", {"status": {"phase": "Running"}})
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"
    core.patch_namespaced_pod_status("b", "default", {"status": {"phase": "Running"}})  # other name: served
    core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"x": "y"}}})  # main resource: served
    apiserver.faults.clear()
    apiserver.faults.fail("*", "pods*", status=503, count=1)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_status("a", "default")
    assert err.value.status == 503
    assert core.read_namespaced_pod_status("a", "default").metadata.name == "a"


def test_too_many_requests_carries_retry_after(apiserver):
    apiserver.faults.fail("list", "nodes", status=429, retry_after=7)
    conn = http.client.HTTPConnection(apiserver.host, apiserver.port, timeout=5)
    try:
        conn.request("GET", "/api/v1/nodes")
        resp = conn.getresponse()
        body = json.loads(resp.read())
        assert (resp.status, resp.getheader("Retry-After"), body["reason"]) == (429, "7", "TooManyRequests")
        conn.request("GET", "/api/v1/nodes")  # same keep-alive connection, next request is served
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def test_reset_connection_and_delay(apiserver):
    apiserver.faults.reset_connection("get", "", count=1)  # /version and discovery have resource ""
    conn = http.client.HTTPConnection(apiserver.host, apiserver.port, timeout=5)
    try:
        conn.request("GET", "/version")
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
            conn.getresponse()
    finally:
        conn.close()
    apiserver.faults.delay(0.3, "list", "pods", count=1)
    conn = http.client.HTTPConnection(apiserver.host, apiserver.port, timeout=5)
    try:
        t0 = time.monotonic()
        conn.request("GET", "/api/v1/pods")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200 and time.monotonic() - t0 >= 0.3
        t0 = time.monotonic()
        conn.request("GET", "/api/v1/pods")
        conn.getresponse().read()
        assert time.monotonic() - t0 < 0.3  # count=1: only the first one waited
    finally:
        conn.close()


def test_stop_refuses_connections_and_restart_keeps_the_state(apiserver, core):
    core.create_node({"metadata": {"name": "n1"}})
    port = apiserver.port
    apiserver.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    apiserver.start(port=port)
    assert apiserver.port == port
    assert core.read_node("n1").metadata.name == "n1"  # the client's pooled connection is replaced


def test_requests_are_logged_with_verbs_and_server_time(apiserver, core):
    before = apiserver.store.clock()
    core.create_namespaced_pod("default", pod_body("a"))
    core.list_namespaced_pod("default", field_selector="spec.nodeName=n1")
    core.read_namespaced_pod("a", "default")
    core.delete_namespaced_pod("a", "default")
    seen = [(r.verb, r.resource, r.namespace, r.name, r.status) for r in apiserver.requests.requests(resource="pods")]
    assert seen == [
        ("create", "pods", "default", None, 201),
        ("list", "pods", "default", None, 200),
        ("get", "pods", "default", "a", 200),
        ("delete", "pods", "default", "a", 200),
    ]
    assert all(r.time >= before for r in apiserver.requests.requests())
    assert apiserver.requests.requests("list", "pods")[0].query == "fieldSelector=spec.nodeName%3Dn1"
    assert len(apiserver.requests.writes(since=before)) == 2
