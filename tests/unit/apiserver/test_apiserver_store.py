"""Store semantics: versions, conflicts, subresources, binding, watch fan-out and history."""

from __future__ import annotations

import threading

import pytest

from vgpu.sim.apiserver.errors import ApiError
from vgpu.sim.apiserver.events import from_core, to_core
from vgpu.sim.apiserver.resources import PODS
from vgpu.sim.apiserver.store import Store, compile_selectors


def pod(name: str, ns: str = "default", **meta) -> dict:
    return {
        "metadata": {"name": name, "namespace": ns, **meta},
        "spec": {"containers": [{"name": "main", "image": "img:1"}]},
    }


def error_of(fn, *args, **kwargs) -> ApiError:
    with pytest.raises(ApiError) as err:
        fn(*args, **kwargs)
    return err.value


@pytest.fixture
def store() -> Store:
    return Store(history_size=50)


def drain(watcher, timeout: float = 1.0) -> list[tuple[str, str]]:
    out = []
    while True:
        ev = watcher.next(0 if out else timeout)
        if ev is None or ev.type == "CLOSED":
            return out
        out.append((ev.type, ev.stored.name if ev.stored else str(ev.rv)))


def test_create_sets_server_fields_and_versions_increase(store):
    a = store.create("pods", pod("a"))
    b = store.create("pods", pod("b"))
    assert a["metadata"]["uid"] != b["metadata"]["uid"]
    assert a["metadata"]["creationTimestamp"].endswith("Z")
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    assert a["metadata"]["generation"] == 1
    assert a["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert a["spec"]["schedulerName"] == "default-scheduler"
    assert store.resource_version == int(b["metadata"]["resourceVersion"])


def test_create_errors(store):
    store.create("pods", pod("a"))
    err = error_of(store.create, "pods", pod("a"))
    assert (err.code, err.reason, err.message) == (409, "AlreadyExists", 'pods "a" already exists')
    err = error_of(store.create, "pods", pod("Bad_Name"))
    assert (err.code, err.reason) == (422, "Invalid")
    assert err.details["causes"][0]["field"] == "metadata.name"
    err = error_of(store.create, "pods", {"metadata": {"name": "x"}, "spec": {"containers": []}})
    assert err.code == 422 and "spec.containers" in err.message
    err = error_of(store.create, "pods", pod("x", annotations={"bad key!": "v"}))
    assert err.code == 422 and "metadata.annotations" in err.message
    err = error_of(store.create, "pods", pod("x"), "other")
    assert err.code == 400 and "does not match the namespace" in err.message


def test_generate_name_and_limits_default_requests(store):
    p = pod("", generateName="job-")
    p["spec"]["containers"][0]["resources"] = {"limits": {"volcano.sh/vgpu-number": 2}}
    out = store.create("pods", p)
    assert out["metadata"]["name"].startswith("job-") and len(out["metadata"]["name"]) == 9
    assert out["spec"]["containers"][0]["resources"] == {
        "limits": {"volcano.sh/vgpu-number": "2"},
        "requests": {"volcano.sh/vgpu-number": "2"},
    }


def test_stale_update_conflicts_and_unconditional_update_wins(store):
    n = store.create("nodes", {"metadata": {"name": "n1"}})
    store.patch("nodes", None, "n1", {"metadata": {"labels": {"a": "1"}}})
    n["metadata"]["labels"] = {"b": "2"}
    err = error_of(store.update, "nodes", n)
    assert (err.code, err.reason) == (409, "Conflict")
    assert err.message == (
        'Operation cannot be fulfilled on nodes "n1": the object has been modified; please '
        "apply your changes to the latest version and try again"
    )
    n["metadata"]["resourceVersion"] = ""
    assert store.update("nodes", n)["metadata"]["labels"] == {"b": "2"}


def test_patch_with_resource_version_is_a_precondition(store):
    store.create("nodes", {"metadata": {"name": "n1"}})
    err = error_of(
        store.patch, "nodes", None, "n1", {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}}, "merge"
    )
    assert err.code == 409


def test_noop_patch_does_not_write(store):
    store.create("nodes", {"metadata": {"name": "n1", "labels": {"a": "1"}}})
    rv = store.resource_version
    out = store.patch("nodes", None, "n1", {"metadata": {"labels": {"a": "1"}}})
    assert out["metadata"]["resourceVersion"] == str(rv)
    assert store.resource_version == rv


def test_status_subresource_split(store):
    store.create(
        "nodes", {"metadata": {"name": "n1"}, "spec": {"podCIDR": "10.0.0.0/24"}, "status": {"capacity": {"cpu": "4"}}}
    )
    out = store.patch("nodes", None, "n1", {"spec": {"unschedulable": True}, "status": {"capacity": {"cpu": "8"}}})
    assert out["spec"]["unschedulable"] is True and out["status"]["capacity"] == {"cpu": "4"}
    out = store.patch(
        "nodes",
        None,
        "n1",
        {"spec": {"unschedulable": False}, "status": {"allocatable": {"volcano.sh/vgpu-number": 10}}},
        subresource="status",
    )
    assert out["spec"]["unschedulable"] is True
    assert out["status"]["allocatable"] == {"volcano.sh/vgpu-number": "10"}


def test_pod_spec_is_immutable_except_allowed_fields(store):
    store.create("pods", pod("a"))
    err = error_of(store.patch, "pods", "default", "a", {"spec": {"nodeName": "n1"}})
    assert err.code == 422 and "pod updates may not change fields" in err.message
    out = store.patch("pods", "default", "a", {"spec": {"containers": [{"name": "main", "image": "img:2"}]}})
    assert out["spec"]["containers"][0]["image"] == "img:2"
    assert out["metadata"]["generation"] == 2


def test_binding_sets_node_and_copies_annotations(store):
    store.create("pods", pod("a", annotations={"keep": "1", "over": "old"}))
    out = store.bind("default", "a", "n1", {"over": "new", "volcano.sh/vgpu-ids-new": "GPU-1,NVIDIA,3000,50:"})
    assert out["spec"]["nodeName"] == "n1"
    assert out["metadata"]["annotations"] == {
        "keep": "1",
        "over": "new",
        "volcano.sh/vgpu-ids-new": "GPU-1,NVIDIA,3000,50:",
    }
    assert {"type": "PodScheduled", "status": "True"}.items() <= out["status"]["conditions"][0].items()
    err = error_of(store.bind, "default", "a", "n2")
    assert err.code == 409 and 'already assigned to node "n1"' in err.message
    assert error_of(store.bind, "default", "missing", "n1").code == 404


def test_list_filters_and_paginates(store):
    for i in range(6):
        store.create("pods", pod(f"p{i}", labels={"i": str(i % 2)}))
    store.bind("default", "p1", "n1")
    store.bind("default", "p3", "n1")
    names = lambda items: [p["metadata"]["name"] for p in items]  # noqa: E731
    assert names(store.list("pods", field_selector="spec.nodeName=n1")) == ["p1", "p3"]
    assert names(store.list("pods", field_selector="spec.nodeName!=n1,metadata.name!=p0")) == ["p2", "p4", "p5"]
    assert names(store.list("pods", label_selector="i in (1)")) == ["p1", "p3", "p5"]
    assert names(store.list("pods", "kube-system")) == []
    items, rv, token, remaining = store.list_stored("pods", limit=4)
    assert [s.name for s in items] == ["p0", "p1", "p2", "p3"] and remaining == 2 and token
    items, rv2, token2, _ = store.list_stored("pods", limit=4, continue_token=token)
    assert [s.name for s in items] == ["p4", "p5"] and token2 is None and rv2 == rv
    err = error_of(compile_selectors, PODS, "spec.image=x", None)
    assert (err.code, err.message) == (400, "field label not supported: spec.image")


def test_watch_transitions_follow_the_selector(store):
    fields, labels = compile_selectors(PODS, "spec.nodeName=n1", None)
    w = store.watch("pods", None, fields, labels, resource_version=str(store.resource_version))
    store.create("pods", pod("a"))
    store.bind("default", "a", "n1")
    store.patch("pods", "default", "a", {"metadata": {"annotations": {"x": "1"}}})
    store.delete("pods", "default", "a")
    assert drain(w) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]

    _, labels = compile_selectors(PODS, None, "team=x")
    w = store.watch("pods", "default", labels=labels, resource_version=str(store.resource_version))
    store.create("pods", pod("b", labels={"team": "x"}))
    store.patch("pods", "default", "b", {"metadata": {"labels": {"team": "y"}}})
    events = []
    while (ev := w.next(0.5)) is not None:
        events.append(ev)
        if len(events) == 2:
            break
    assert [e.type for e in events] == ["ADDED", "DELETED"]
    # DELETED carries the last matching content, stamped with the change's resourceVersion.
    assert events[1].stored.obj["metadata"]["labels"] == {"team": "x"}
    assert events[1].stored.obj["metadata"]["resourceVersion"] == str(store.resource_version)


def test_watch_without_version_starts_with_the_current_state(store):
    store.create("pods", pod("a"))
    store.create("pods", pod("b"))
    w = store.watch("pods", "default")
    assert drain(w) == [("ADDED", "a"), ("ADDED", "b")]
    w = store.watch("pods", "default", send_initial_events=True, allow_bookmarks=True)
    events = [w.next(0.1) for _ in range(3)]
    assert [e.type for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
    assert events[2].annotations == {"k8s.io/initial-events-end": "true"}
    store.compact()
    # with initial events an old version means "not older than": no 410, the current state is sent
    w = store.watch("pods", "default", resource_version="2", send_initial_events=True)
    assert drain(w) == [("ADDED", "a"), ("ADDED", "b")]
    assert error_of(store.watch, "pods", resource_version="abc").code == 400


def test_watch_resumes_from_history_and_expires(store):
    store.create("pods", pod("a"))
    since = store.resource_version
    store.patch("pods", "default", "a", {"metadata": {"labels": {"x": "1"}}})
    store.create("pods", pod("b"))
    w = store.watch("pods", resource_version=str(since))
    assert drain(w) == [("MODIFIED", "a"), ("ADDED", "b")]
    for i in range(60):  # history_size is 50
        store.patch("pods", "default", "a", {"metadata": {"labels": {"x": str(i + 2)}}})
    w = store.watch("pods", resource_version=str(since))
    ev = w.next(0.1)
    assert ev.type == "ERROR" and ev.error["code"] == 410 and ev.error["reason"] == "Expired"
    assert ev.error["message"].startswith(f"too old resource version: {since} (")
    assert w.next(0.1).type == "CLOSED"
    now = store.compact()
    assert store.watch("pods", resource_version=str(now)).next(0.05) is None


def test_bookmark_only_when_the_watcher_is_drained(store):
    w = store.watch("pods", resource_version=str(store.resource_version))
    store.create("pods", pod("a"))
    assert store.bookmark(w) is None
    w.next(0.1)
    assert store.bookmark(w) == store.resource_version


def test_finalizers_defer_deletion(store):
    store.create(
        "configmaps", {"metadata": {"name": "c", "namespace": "default", "finalizers": ["x/y"]}, "data": {"a": "1"}}
    )
    last = store.delete("configmaps", "default", "c")
    assert last["metadata"]["deletionTimestamp"]
    assert store.try_get("configmaps", "default", "c") is not None
    store.patch("configmaps", "default", "c", {"metadata": {"finalizers": None}}, "merge")
    assert store.try_get("configmaps", "default", "c") is None


def test_graceful_pod_deletion_when_enabled():
    store = Store(graceful_pod_deletion=True)
    store.create("pods", pod("a"))
    store.bind("default", "a", "n1")
    last = store.delete("pods", "default", "a")
    assert last["metadata"]["deletionGracePeriodSeconds"] == 30
    assert store.try_get("pods", "default", "a") is not None
    store.delete("pods", "default", "a", grace_period_seconds=0)
    assert store.try_get("pods", "default", "a") is None


def test_delete_preconditions_and_namespace_cascade(store):
    p = store.create("pods", pod("a", "team"))
    err = error_of(store.delete, "pods", "team", "a", preconditions={"uid": "other"})
    assert err.code == 409 and "Precondition failed: UID" in err.message
    store.delete("pods", "team", "a", preconditions={"uid": p["metadata"]["uid"]})
    store.create("pods", pod("b", "team"))
    store.delete("namespaces", None, "team")
    assert store.list("pods", "team") == []


def test_wait_for_wakes_on_commit(store):
    def later():
        store.create("pods", pod("late"))

    t = threading.Timer(0.05, later)
    t.start()
    try:
        got = store.wait_for(lambda s: s.try_get("pods", "default", "late"), timeout=5, what="pod late")
    finally:
        t.join()
    assert got["metadata"]["name"] == "late"
    with pytest.raises(TimeoutError, match="never"):
        store.wait_for(lambda s: False, timeout=0.05, what="never")


def test_events_v1_round_trip():
    v1 = {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": "e"},
        "regarding": {"kind": "Pod", "name": "p"},
        "note": "boom",
        "reason": "Failed",
        "type": "Warning",
        "reportingController": "vgpu",
        "reportingInstance": "n1",
        "action": "Allocate",
        "eventTime": "2026-01-01T00:00:00.000000Z",
    }
    core = to_core(v1)
    assert core["involvedObject"] == {"kind": "Pod", "name": "p"} and core["message"] == "boom"
    assert from_core(core) == v1
