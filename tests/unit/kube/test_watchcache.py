"""The node-scoped pod cache: LIST+WATCH over HTTP, resync after watch errors and 410, write-through."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vgpu.kube.caches import node_pod_cache
from vgpu.kube.client import KubeApiError, KubeClient, KubeUnavailable
from vgpu.kube.watchcache import WatchCache, newer_or_equal
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.kubelet.admission import pod_manifest

from .conftest import NODE


@pytest.fixture
def api() -> Iterator[ApiServer]:
    s = ApiServer(bookmark_interval=0.2).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def client(api: ApiServer) -> Iterator[KubeClient]:
    c = KubeClient(api.client_configuration())
    yield c
    c.close()


@pytest.fixture
def cache(client: KubeClient) -> Iterator[WatchCache]:
    c = node_pod_cache(client, NODE).start()
    assert c.wait_synced(5)
    yield c
    c.stop()


def watching(api: ApiServer) -> None:
    """Wait until the cache's watch is open on the server (so dropping it is observable)."""
    api.store.wait_for(lambda s: s.watch_count("pods") >= 1, 5, "the cache's pod watch")


def add_pod(api: ApiServer, name: str, node: str = NODE) -> dict:
    pod = pod_manifest(name, [{"name": "c"}])
    pod["spec"]["nodeName"] = node
    return api.store.create("pods", pod, "default")


def names(cache: WatchCache) -> set[str]:
    return {p["metadata"]["name"] for p in cache.items()}


def test_only_this_nodes_pods_with_a_field_selector(api, cache):
    add_pod(api, "mine")
    add_pod(api, "other", node="node-2")
    assert cache.wait_for(lambda c: names(c) == {"mine"}, 5)
    api.store.delete("pods", "default", "mine")
    assert cache.wait_for(lambda c: names(c) == set(), 5)
    queries = [r.query for r in api.requests.requests(resource="pods")]
    assert queries and all("spec.nodeName%3Dnode-1" in q or "spec.nodeName=node-1" in q for q in queries)


def test_resync_after_abrupt_watch_failure(api, cache):
    watching(api)
    lists = cache.lists
    api.drop_watches(abrupt=True)
    add_pod(api, "after-reset")
    assert cache.wait_for(lambda c: "after-reset" in names(c), 10)
    assert cache.wait_for(lambda c: c.lists > lists, 5)  # re-listed


def test_resync_after_410_gone(api, cache):
    add_pod(api, "a")
    assert cache.wait_for(lambda c: "a" in names(c), 5)
    watching(api)
    lists = cache.lists
    api.faults.delay(0.5, "watch", "pods", count=1)  # the re-watch arrives after the compaction below
    api.drop_watches()  # clean end: the cache re-watches from its last resourceVersion …
    api.store.create("nodes", {"metadata": {"name": "bump"}})
    api.store.compact()  # … which is now older than the compaction: 410 Gone → re-LIST
    add_pod(api, "b")
    assert cache.wait_for(lambda c: names(c) == {"a", "b"} and c.lists > lists, 10)


def test_clean_watch_end_resumes_without_relist(api, cache):
    watching(api)
    lists = cache.lists
    api.drop_watches()
    add_pod(api, "x")
    assert cache.wait_for(lambda c: "x" in names(c), 5)
    assert cache.lists == lists


def test_write_through_is_never_undone_by_a_lagging_event(api, client, cache):
    add_pod(api, "p")
    assert cache.wait_for(lambda c: "p" in names(c), 5)
    newer = client.patch_pod_annotations("default", "p", {"k": "2"})
    cache.upsert(newer)  # False when the watch was even faster
    old = dict(newer, metadata=dict(newer["metadata"], resourceVersion="1", annotations={"k": "old"}))
    assert not cache.upsert(old)
    assert cache.get(newer["metadata"]["uid"])["metadata"]["annotations"]["k"] == "2"


def test_resync_keeps_newer_write_through_and_drops_deleted(api, client, cache):
    add_pod(api, "keep")
    add_pod(api, "gone")
    assert cache.wait_for(lambda c: names(c) == {"keep", "gone"}, 5)
    cache.stop()
    api.store.delete("pods", "default", "gone")
    cache.resync()
    assert names(cache) == {"keep"}


def test_keeps_serving_while_api_is_down_and_recovers(api, client, cache):
    add_pod(api, "p")
    assert cache.wait_for(lambda c: "p" in names(c), 5)
    port = api.port
    api.stop()
    with pytest.raises(KubeUnavailable):
        cache.resync()
    assert names(cache) == {"p"}  # last known state
    api.start(port=port)
    add_pod(api, "q")
    assert cache.wait_for(lambda c: names(c) == {"p", "q"}, 15)


def test_client_errors_name_status():
    with pytest.raises(KubeApiError) as info:
        raise KubeApiError("patch pod default/p", 404, "Not Found", 'pods "p" not found')
    assert info.value.not_found and "HTTP 404" in str(info.value)


def test_resource_version_order():
    assert newer_or_equal("10", "9") and not newer_or_equal("9", "10") and newer_or_equal("a", "10")
