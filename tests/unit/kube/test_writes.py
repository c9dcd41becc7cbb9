"""The one write path of Allocate (vgpu/kube/writes.py) and the pod views beside the pod cache.

A fake queue records what would be retried in the background; no API server is needed.
"""

from __future__ import annotations

from typing import Any

from vgpu.kube.client import KubeApiError, KubeDeadlineExceeded, KubeUnavailable
from vgpu.kube.pod_views import PodViews
from vgpu.kube.writes import Tries, gone, write
from vgpu.protocol.pod_model import ResourceNames


class Queue:
    def __init__(self) -> None:
        self.tasks: list[tuple[str, Any, Any]] = []

    def submit(self, what: str, fn: Any, still_needed: Any = None) -> None:
        self.tasks.append((what, fn, still_needed))


class Flaky:
    """Fails with ``errors`` in turn, then returns ``"ok"``."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def http(status: int) -> KubeApiError:
    return KubeApiError("patch pod", status, "x")


def test_tries_now_with_the_given_backoff_then_lands():
    fn, q, slept = Flaky(http(500), KubeUnavailable("down")), Queue(), []
    got = write("w", fn, queue=q, tries=Tries(5, 0.1, 2.0), sleep=slept.append)
    assert (got.done, got.value, fn.calls, slept, q.tasks) == (True, "ok", 3, [0.1, 0.2], [])


def test_a_used_up_budget_is_not_retried_now_but_handed_to_the_queue():
    fn, q = Flaky(KubeDeadlineExceeded("no time left")), Queue()
    got = write("w", fn, queue=q, tries=Tries(5), sleep=lambda _s: None)
    assert fn.calls == 1 and got.queued and isinstance(got.error, KubeDeadlineExceeded)
    assert [w for w, _, _ in q.tasks] == ["w"]


def test_hand_off_decides_what_is_queued_and_now_false_queues_without_a_call():
    fn, q = Flaky(http(404)), Queue()
    got = write("w", fn, queue=q, hand_off=lambda exc: not gone(exc))
    assert not got.queued and got.error is not None and got.error.status == 404 and q.tasks == []
    later = Flaky()
    needed = lambda: True  # noqa: E731
    got = write("later", later, queue=q, now=False, still_needed=needed)
    assert got.queued and got.error is None and later.calls == 0
    assert q.tasks == [("later", later, needed)]


def test_without_a_queue_a_failure_is_only_reported():
    got = write("w", Flaky(http(500)), queue=None)
    assert not got.done and not got.queued and got.error.status == 500


class Source:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods

    def items(self) -> list[dict[str, Any]]:
        return list(self.pods)

    def resync(self) -> None:
        pass

    def upsert(self, obj: dict[str, Any]) -> bool:
        self.pods = [p for p in self.pods if p["metadata"]["uid"] != obj["metadata"]["uid"]] + [obj]
        return True


def pod(uid: str, rv: str) -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "name": uid, "namespace": "default", "resourceVersion": rv},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"example.com/n": "1"}}}]},
    }


def test_pod_views_are_built_once_per_resource_version_and_per_resource_names():
    names = ResourceNames("example.com/n", "example.com/m", "example.com/c")
    src = Source([pod("a", "1"), pod("b", "1")])
    views = PodViews(src)
    first = views.current(names)
    assert [v.uid for v in first] == ["a", "b"] and len(first[0].containers) == 1
    again = views.current(names)
    assert all(x is y for x, y in zip(first, again, strict=True))  # same pods, same versions: reused
    views.write_through(pod("a", "2"))
    third = views.current(names)
    assert third[0] is first[1] and third[1] is not first[0] and third[1].resource_version == "2"
    assert views.contains("a") and not views.contains("zz")
    other = views.current(ResourceNames("other/n", "other/m", "other/c"))
    assert other[0] is not third[0] and other[0].containers == ()  # renamed resources: rebuilt
