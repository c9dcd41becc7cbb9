"""The pod-view index: per change, never per pod, and always equal to a full re-read (as sets: the
order of pods in the cache carries no meaning; matching orders candidates by its own rules)."""

from __future__ import annotations

import random
from typing import Any

from vgpu.kube.client import ListResult
from vgpu.kube.pod_views import PodViews, waiting
from vgpu.kube.watchcache import CHANGE_LOG, WatchCache
from vgpu.protocol import keys
from vgpu.protocol.pod_devices import ContainerDevice, encode_pod_devices
from vgpu.protocol.pod_model import ResourceNames

NAMES = ResourceNames("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")


class Counted(WatchCache):
    """A watch cache fed by hand that counts how many objects the views read in full."""

    def __init__(self) -> None:
        self.listed: list[dict[str, Any]] = []
        super().__init__("pods", lambda: ListResult(list(self.listed), "999999"), lambda rv: iter(()))  # type: ignore[arg-type,return-value]
        self.full_reads = 0

    def items(self) -> list[dict[str, Any]]:
        self.full_reads += 1
        return super().items()


GPUS = [f"GPU-{g:08x}-0000-0000-0000-000000000000" for g in range(4)]


def pod(i: int, rv: int, phase: str | None, gpus: tuple[str, ...] = ()) -> dict[str, Any]:
    ann = {"volcano.sh/bind-phase": phase} if phase else {}
    if gpus:
        ann[keys.VGPU_IDS_NEW] = encode_pod_devices(
            [[ContainerDevice(g, 1, 0) for g in gpus]], annotation=keys.VGPU_IDS_NEW
        )
    return {
        "metadata": {
            "uid": f"u{i}",
            "name": f"p{i}",
            "namespace": "default",
            "resourceVersion": str(rv),
            "annotations": ann,
        },
        "spec": {"containers": [{"name": "c"}]},
    }


def snapshot(views: PodViews) -> tuple[list[tuple[str, str]], list[str], list[list[str]]]:
    full = sorted((v.uid, v.resource_version) for v in views.current(NAMES))
    on_gpu = [sorted(v.uid for v in views.assigned_to(NAMES, [g])) for g in GPUS]
    return full, sorted(v.uid for v in views.waiting(NAMES)), on_gpu


def reference(cache: WatchCache) -> tuple[list[tuple[str, str]], list[str], list[list[str]]]:
    fresh = PodViews(cache)
    return snapshot(fresh)


def test_random_changes_keep_the_index_equal_to_a_full_read_and_read_nothing_in_full():
    rnd = random.Random(7)
    cache = Counted()
    cache.resync()
    views = PodViews(cache)
    views.current(NAMES)
    reads = cache.full_reads
    rv = 0
    for _ in range(2000):
        rv += 1
        i = rnd.randrange(200)
        if rnd.random() < 0.2:
            cache._apply("DELETED", pod(i, rv, None))
        else:
            held = tuple(rnd.sample(GPUS, rnd.randrange(3)))
            cache.upsert(pod(i, rv, rnd.choice([None, "allocating", "success", "failed"]), held))
        if rnd.random() < 0.1:
            mine = snapshot(views)
            before = cache.full_reads
            assert mine == reference(cache)
            cache.full_reads = before
    assert cache.full_reads == reads  # every refresh came from the change log
    assert all(waiting(v) for v in views.waiting(NAMES))
    assert any(snapshot(views)[2])  # the per-GPU index was exercised


def test_the_gpu_index_names_the_pods_assigned_to_a_gpu_and_the_uids_asked_for():
    cache = Counted()
    cache.resync()
    cache.upsert(pod(1, 1, "success", (GPUS[0],)))
    cache.upsert(pod(2, 2, "allocating", (GPUS[0], GPUS[1])))
    cache.upsert(pod(3, 3, None))
    views = PodViews(cache)
    assert sorted(v.uid for v in views.assigned_to(NAMES, [GPUS[0]])) == ["u1", "u2"]
    assert [v.uid for v in views.assigned_to(NAMES, [GPUS[1]], also=["u3", "gone"])] in (["u2", "u3"], ["u3", "u2"])
    # a new version that drops the GPU leaves the index; a deleted pod too
    cache.upsert(pod(2, 4, "success", (GPUS[1],)))
    cache._apply("DELETED", pod(1, 5, None))
    assert views.assigned_to(NAMES, [GPUS[0]]) == []
    assert [v.uid for v in views.assigned_to(NAMES, [GPUS[1]])] == ["u2"]


def test_a_relist_or_an_overflowing_log_falls_back_to_a_full_read():
    cache = Counted()
    cache.listed = [pod(i, 1, "allocating") for i in range(5)]
    cache.resync()
    views = PodViews(cache)
    assert len(views.waiting(NAMES)) == 5
    cache.listed = [pod(i, 2, "success") for i in range(3)]
    cache.resync()
    reads = cache.full_reads
    assert views.waiting(NAMES) == [] and len(views.current(NAMES)) == 3
    assert cache.full_reads == reads + 1
    for n in range(CHANGE_LOG + 1):
        cache.upsert(pod(0, 3 + n, "allocating"))
    assert [v.uid for v in views.waiting(NAMES)] == ["u0"]
    assert cache.full_reads == reads + 2


def test_tombstoned_pods_named_in_also_are_returned_whatever_their_phase():
    cache = Counted()
    cache.upsert(pod(1, 1, "success"))
    cache.upsert(pod(2, 2, "allocating"))
    views = PodViews(cache)
    assert [v.uid for v in views.waiting(NAMES, also=["u1", "gone"])] == ["u2", "u1"]
    assert views.contains("u1") and not views.contains("gone")
