"""Event aggregation (docs/protocol.md §10): repeats PATCH count and lastTimestamp, as client-go does."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu.kube.client import KubeApiError, KubeUnavailable
from vgpu.kube.events import EventRecorder


class FakeEvents:
    """Just the two event calls of KubeClient, with failures to order."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.fail_next: Exception | None = None

    def _maybe_fail(self) -> None:
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc

    def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail()
        name = f"ev{len(self.events)}"
        stored = {**body, "metadata": {**body["metadata"], "name": name}}
        self.events[(namespace, name)] = stored
        return stored

    def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail()
        if (namespace, name) not in self.events:
            raise KubeApiError(f"patch event {namespace}/{name}", 404, "NotFound")
        self.events[(namespace, name)].update(body)
        return self.events[(namespace, name)]


class Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def rec() -> tuple[EventRecorder, FakeEvents, Clock]:
    api, clock = FakeEvents(), Clock()
    return EventRecorder(api, "node-1", clock=clock, monotonic=clock, max_cached=3), api, clock  # type: ignore[arg-type]


def test_repeats_within_the_window_count_on_one_event(rec):
    r, api, clock = rec
    for _ in range(5):
        r.node_event("node-1", "VGPUNoPendingPod", "cannot get valid pod")
        clock.t += 10
    (ev,) = api.events.values()
    assert ev["count"] == 5
    assert ev["firstTimestamp"] == "2027-01-15T08:00:00Z" and ev["lastTimestamp"] == "2027-01-15T08:00:40Z"


def test_a_different_message_object_or_reason_is_another_event(rec):
    r, api, _ = rec
    r.node_event("node-1", "VGPUNoPendingPod", "a")
    r.node_event("node-1", "VGPUNoPendingPod", "b")
    r.node_event("node-1", "VGPUContainerUnlimited", "a")
    r.pod_event({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}, "VGPUNoPendingPod", "a")
    assert len(api.events) == 4 and all(e["count"] == 1 for e in api.events.values())


def test_after_the_window_a_new_event_starts(rec):
    r, api, clock = rec
    r.node_event("node-1", "R", "m")
    clock.t += r.window_s + 1
    r.node_event("node-1", "R", "m")
    assert sorted(e["count"] for e in api.events.values()) == [1, 1]


def test_an_expired_event_is_created_again(rec):
    r, api, _ = rec
    r.node_event("node-1", "R", "m")
    api.events.clear()  # the API server's event TTL
    r.node_event("node-1", "R", "m")
    (ev,) = api.events.values()
    assert ev["count"] == 1


def test_a_failed_patch_is_not_counted_so_the_retry_counts_it_once(rec):
    r, api, _ = rec
    r.node_event("node-1", "R", "m")
    api.fail_next = KubeUnavailable("down")
    with pytest.raises(KubeUnavailable):
        r.node_event("node-1", "R", "m")
    r.node_event("node-1", "R", "m")  # what the retry queue does
    (ev,) = api.events.values()
    assert ev["count"] == 2


def test_the_cache_is_bounded_least_recently_used_first(rec):
    r, api, _ = rec
    for m in ("a", "b", "c", "d"):
        r.node_event("node-1", "R", m)
    assert r.cached == 3
    r.node_event("node-1", "R", "a")  # forgotten: a new Event
    r.node_event("node-1", "R", "d")  # remembered: counted
    counts = sorted((e["message"], e["count"]) for e in api.events.values())
    assert counts == [("a", 1), ("a", 1), ("b", 1), ("c", 1), ("d", 2)]


def test_without_patch_rights_each_repeat_is_a_new_event(rec):
    """An older ClusterRole (events: create only) answers 403 to the PATCH: fall back to create."""
    r, api, _ = rec
    r.node_event("node-1", "R", "m")
    api.fail_next = KubeApiError("patch event", 403, "Forbidden")
    r.node_event("node-1", "R", "m")
    assert sorted(e["count"] for e in api.events.values()) == [1, 1]
