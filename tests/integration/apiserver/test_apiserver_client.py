"""The official kubernetes client against the simulated API server over HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.apiserver.conftest import pod_body


def status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_discovery(apiserver, api_client):
    version = client.VersionApi(api_client).get_code()
    assert version.git_version == "v1.32.0" and version.major == "1"
    core_resources = client.CoreV1Api(api_client).get_api_resources()
    by_name = {r.name: r for r in core_resources.resources}
    assert {
        "pods",
        "pods/binding",
        "pods/status",
        "nodes",
        "nodes/status",
        "events",
        "configmaps",
        "namespaces",
        "bindings",
    } <= set(by_name)
    assert by_name["pods"].namespaced and not by_name["nodes"].namespaced
    assert set(by_name["pods"].verbs) >= {"create", "get", "list", "watch", "patch", "delete"}
    assert by_name["pods/binding"].verbs == ["create"] and by_name["pods/binding"].kind == "Binding"
    groups = client.ApisApi(api_client).get_api_versions()
    assert [g.name for g in groups.groups] == ["events.k8s.io"]
    assert client.EventsV1Api(api_client).get_api_resources().resources[0].name == "events"


def test_pod_crud_and_the_three_patch_types(core):
    created = core.create_namespaced_pod("default", pod_body("p1", annotations={"a": "1"}))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.status.phase == "Pending"
    got = core.read_namespaced_pod("p1", "default")
    assert got.metadata.uid == created.metadata.uid

    # strategic merge is the client's default for dict bodies
    out = core.patch_namespaced_pod("p1", "default", {"metadata": {"annotations": {"b": "2", "a": None}}})
    assert out.metadata.annotations == {"b": "2"}
    assert int(out.metadata.resource_version) > int(created.metadata.resource_version)
    # merge patch
    out = core.patch_namespaced_pod(
        "p1", "default", {"metadata": {"labels": {"x": "y"}}}, _content_type="application/merge-patch+json"
    )
    assert out.metadata.labels == {"x": "y"}
    # JSON patch (a list body)
    out = core.patch_namespaced_pod(
        "p1",
        "default",
        [
            {"op": "replace", "path": "/metadata/annotations/b", "value": "3"},
            {"op": "test", "path": "/metadata/labels/x", "value": "y"},
        ],
    )
    assert out.metadata.annotations == {"b": "3"}
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("p1", "default", [{"op": "test", "path": "/metadata/labels/x", "value": "z"}])
    assert err.value.status == 422

    names = [p.metadata.name for p in core.list_namespaced_pod("default").items]
    assert names == ["p1"]
    deleted = core.delete_namespaced_pod("p1", "default")
    assert deleted.metadata.name == "p1"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("p1", "default")
    assert err.value.status == 404
    assert status_of(err.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "p1" not found',
        "reason": "NotFound",
        "details": {"name": "p1", "kind": "pods"},
        "code": 404,
    }


def test_node_patch_types_update_conflict_and_status(core):
    node = core.create_node(
        {
            "metadata": {"name": "n1", "annotations": {"volcano.sh/node-vgpu-handshake": "x"}},
            "status": {"capacity": {"volcano.sh/vgpu-number": "10"}},
        }
    )
    assert node.status.capacity == {"volcano.sh/vgpu-number": "10"}
    core.patch_node("n1", {"metadata": {"annotations": {"volcano.sh/node-vgpu-register": "r"}}})
    core.patch_node("n1", {"metadata": {"labels": {"gpu": "on"}}}, _content_type="application/merge-patch+json")
    core.patch_node("n1", [{"op": "add", "path": "/spec/unschedulable", "value": True}])
    got = core.read_node("n1")
    assert got.metadata.annotations == {"volcano.sh/node-vgpu-handshake": "x", "volcano.sh/node-vgpu-register": "r"}
    assert got.metadata.labels == {"gpu": "on"} and got.spec.unschedulable is True

    # update with the resourceVersion we read an edit ago -> 409 Conflict
    stale = node
    stale.metadata.labels = {"other": "1"}
    with pytest.raises(ApiException) as err:
        core.replace_node("n1", stale)
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"
    fresh = core.read_node("n1")
    fresh.metadata.labels["other"] = "1"
    assert core.replace_node("n1", fresh).metadata.labels == {"gpu": "on", "other": "1"}

    # the main resource ignores status; nodes/status takes it (capacity map merged per key)
    core.patch_node("n1", {"status": {"capacity": {"volcano.sh/vgpu-number": "99"}}})
    assert core.read_node("n1").status.capacity == {"volcano.sh/vgpu-number": "10"}
    out = core.patch_node_status(
        "n1",
        {
            "status": {
                "allocatable": {"volcano.sh/vgpu-memory": "81920"},
                "capacity": {"volcano.sh/vgpu-memory": "81920"},
            }
        },
    )
    assert out.status.capacity == {"volcano.sh/vgpu-number": "10", "volcano.sh/vgpu-memory": "81920"}
    assert core.read_node_status("n1").status.allocatable == {"volcano.sh/vgpu-memory": "81920"}
    status = core.read_node_status("n1")
    status.status.conditions = [client.V1NodeCondition(type="Ready", status="True")]
    assert core.replace_node_status("n1", status).status.conditions[0].type == "Ready"

    with pytest.raises(ApiException) as err:
        core.create_node({"metadata": {"name": "n1"}})
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"


def test_binding_sets_node_name_and_copies_annotations(apiserver, core):
    core.create_namespaced_pod("default", pod_body("gpu-pod", annotations={"user": "kept"}))
    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(
            name="gpu-pod",
            annotations={"volcano.sh/vgpu-ids-new": "GPU-aaa,NVIDIA,3000,50:", "volcano.sh/bind-phase": "allocating"},
        ),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name="n1"),
    )
    # The real server answers a Binding with a Status, which the client cannot turn into a
    # V1Binding; callers (like the scheduler emulator) read the raw response.
    resp = core.create_namespaced_pod_binding("gpu-pod", "default", binding, _preload_content=False)
    assert resp.status == 201
    assert json.loads(resp.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    pod = core.read_namespaced_pod("gpu-pod", "default")
    assert pod.spec.node_name == "n1"
    assert pod.metadata.annotations == {
        "user": "kept",
        "volcano.sh/vgpu-ids-new": "GPU-aaa,NVIDIA,3000,50:",
        "volcano.sh/bind-phase": "allocating",
    }
    assert [(c.type, c.status) for c in pod.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("gpu-pod", "default", binding, _preload_content=False)
    assert err.value.status == 409
    # the legacy /bindings collection does the same
    core.create_namespaced_pod("default", pod_body("other"))
    resp = core.create_namespaced_binding(
        "default",
        client.V1Binding(
            metadata=client.V1ObjectMeta(name="other"), target=client.V1ObjectReference(kind="Node", name="n2")
        ),
        _preload_content=False,
    )
    assert resp.status == 201 and apiserver.store.get("pods", "default", "other")["spec"]["nodeName"] == "n2"


def test_list_with_field_and_label_selectors(apiserver, core):
    for i, node in enumerate(["n1", "n1", "n2", None]):
        core.create_namespaced_pod(
            "default" if i < 3 else "team", pod_body(f"p{i}", "default" if i < 3 else "team", labels={"idx": str(i)})
        )
        if node:
            apiserver.store.bind("default", f"p{i}", node)
    apiserver.store.patch("pods", "default", "p0", {"status": {"phase": "Running"}}, subresource="status")

    def names(**kw):
        return sorted(p.metadata.name for p in core.list_pod_for_all_namespaces(**kw).items)

    assert names(field_selector="spec.nodeName=n1") == ["p0", "p1"]
    assert names(field_selector="spec.nodeName==n2") == ["p2"]
    assert names(field_selector="spec.nodeName!=n1") == ["p2", "p3"]
    assert names(field_selector="spec.nodeName=") == ["p3"]
    assert names(field_selector="status.phase=Running") == ["p0"]
    assert names(field_selector="metadata.name=p2") == ["p2"]
    assert names(field_selector="metadata.namespace=team") == ["p3"]
    assert names(field_selector="spec.nodeName=n1,status.phase!=Running") == ["p1"]
    assert names(label_selector="idx in (0,3)") == ["p0", "p3"]
    assert names(label_selector="idx notin (0,3),idx!=1") == ["p2"]
    assert names(label_selector="!idx") == []
    assert [p.metadata.name for p in core.list_namespaced_pod("team").items] == ["p3"]
    listed = core.list_namespaced_pod("default", limit=2)
    assert len(listed.items) == 2 and listed.metadata._continue and listed.metadata.remaining_item_count == 1
    rest = core.list_namespaced_pod("default", limit=2, _continue=listed.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["p2"]
    assert listed.metadata.resource_version == str(apiserver.store.resource_version)
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces(field_selector="spec.image=x")
    assert err.value.status == 400 and status_of(err.value)["message"] == "field label not supported: spec.image"
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces(label_selector="a in b")
    assert err.value.status == 400


def test_events_core_and_events_k8s_io(api_client, core):
    pod = core.create_namespaced_pod("default", pod_body("p"))
    ref = client.V1ObjectReference(kind="Pod", name="p", namespace="default", uid=pod.metadata.uid)
    core.create_namespaced_event(
        "default",
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(name="p.1"),
            involved_object=ref,
            reason="UnexpectedAdmissionError",
            message="malformed annotation",
            type="Warning",
            source=client.V1EventSource(component="vgpu"),
        ),
    )
    client.EventsV1Api(api_client).create_namespaced_event(
        "default",
        client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="p.2"),
            regarding=ref,
            reason="Allocated",
            note="ok",
            type="Normal",
            action="Allocate",
            reporting_controller="vgpu",
            reporting_instance="n1",
            event_time="2026-01-01T00:00:00.000000Z",
        ),
    )
    listed = core.list_namespaced_event("default", field_selector=f"involvedObject.uid={pod.metadata.uid}")
    assert sorted((e.metadata.name, e.reason, e.message) for e in listed.items) == [
        ("p.1", "UnexpectedAdmissionError", "malformed annotation"),
        ("p.2", "Allocated", "ok"),
    ]
    warn = core.list_event_for_all_namespaces(field_selector="type=Warning,involvedObject.name=p")
    assert [e.metadata.name for e in warn.items] == ["p.1"]
    # Read raw: like a real server, a core event without eventTime shows "eventTime": null through
    # events.k8s.io, which the client's EventsV1Event model refuses.
    resp = client.EventsV1Api(api_client).list_namespaced_event(
        "default", field_selector="regarding.name=p", _preload_content=False
    )
    v1 = json.loads(resp.data)
    assert v1["kind"] == "EventList" and v1["apiVersion"] == "events.k8s.io/v1"
    assert sorted((e["metadata"]["name"], e["note"], e["eventTime"]) for e in v1["items"]) == [
        ("p.1", "malformed annotation", None),
        ("p.2", "ok", "2026-01-01T00:00:00.000000Z"),
    ]
    assert client.EventsV1Api(api_client).read_namespaced_event("p.2", "default").regarding.uid == pod.metadata.uid


def test_configmaps_crud(core):
    core.create_namespaced_config_map(
        "kube-system",
        {"metadata": {"name": "volcano-vgpu-device-config"}, "data": {"device-config.yaml": "nvidia: {}"}},
    )
    cm = core.read_namespaced_config_map("volcano-vgpu-device-config", "kube-system")
    cm.data["extra"] = "1"
    assert core.replace_namespaced_config_map(cm.metadata.name, "kube-system", cm).data == {
        "device-config.yaml": "nvidia: {}",
        "extra": "1",
    }
    core.patch_namespaced_config_map(cm.metadata.name, "kube-system", {"data": {"extra": None}})
    assert core.read_namespaced_config_map(cm.metadata.name, "kube-system").data == {"device-config.yaml": "nvidia: {}"}
    status = core.delete_namespaced_config_map(cm.metadata.name, "kube-system")
    assert status["status"] == "Success" and status["details"]["name"] == cm.metadata.name
    assert status["details"]["kind"] == "configmaps" and status["details"]["uid"] == cm.metadata.uid
    assert core.list_namespaced_config_map("kube-system").items == []


def test_error_shapes(apiserver, core):
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}})
    body = status_of(err.value)
    assert err.value.status == 422 and body["reason"] == "Invalid"
    assert body["message"] == 'Pod "x" is invalid: spec.containers[0].image: Required value'
    assert body["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers[0].image"}
    ]
    with pytest.raises(urllib.error.HTTPError) as http_err:
        urllib.request.urlopen(apiserver.url + "/api/v1/nope", timeout=5)
    assert http_err.value.code == 404
    assert json.loads(http_err.value.read()) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound",
        "details": {},
        "code": 404,
    }
    core.create_namespaced_pod("default", pod_body("p"))
    req = urllib.request.Request(
        apiserver.url + "/api/v1/namespaces/default/pods/p",
        data=b"<a/>",
        method="PATCH",
        headers={"Content-Type": "application/xml"},
    )
    with pytest.raises(urllib.error.HTTPError) as http_err:
        urllib.request.urlopen(req, timeout=5)
    assert http_err.value.code == 415
    assert json.loads(http_err.value.read())["reason"] == "UnsupportedMediaType"
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("p", "default", {"metadata": {"name": "q"}})
    assert err.value.status == 400


def test_kubeconfig_works_with_the_client_loader(apiserver, tmp_path):
    from kubernetes import config

    path = apiserver.kubeconfig(tmp_path / "kube" / "config", namespace="team")
    loaded = config.new_client_from_config(config_file=str(path))
    try:
        assert loaded.configuration.host == apiserver.url
        client.CoreV1Api(loaded).create_node({"metadata": {"name": "via-kubeconfig"}})
    finally:
        loaded.close()
    assert apiserver.store.get("nodes", None, "via-kubeconfig")["metadata"]["name"] == "via-kubeconfig"


def test_concurrent_writers_and_a_watch_stay_consistent(apiserver, core):
    """8 threads x 25 patches on one node: no lost update, one version per write, ordered events."""
    import threading

    from vgpu.sim.apiserver.resources import NODES
    from vgpu.sim.apiserver.store import compile_selectors

    core.create_node({"metadata": {"name": "busy"}})
    start_rv = apiserver.store.resource_version
    fields, labels = compile_selectors(NODES, "metadata.name=busy", None)
    watcher = apiserver.store.watch("nodes", fields=fields, labels=labels, resource_version=str(start_rv))
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        api = apiserver.api_client()
        try:
            mine = client.CoreV1Api(api)
            for i in range(25):
                mine.patch_node("busy", {"metadata": {"annotations": {f"t{t}-{i}": "x"}}})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            api.close()

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    node = core.read_node("busy")
    assert len(node.metadata.annotations) == 200
    assert int(node.metadata.resource_version) == start_rv + 200
    versions = []
    while (ev := watcher.next(0.5)) is not None and ev.type == "MODIFIED":
        versions.append(ev.stored.rv)
        if len(versions) == 200:
            break
    apiserver.store.unwatch(watcher)
    assert versions == list(range(start_rv + 1, start_rv + 201))
