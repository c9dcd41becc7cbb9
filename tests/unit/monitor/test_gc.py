"""Garbage collection of stale container directories (docs/metrics.md §6.3, M-6, M-11) on a fake clock."""

from __future__ import annotations

import os

from vgpu.monitor.pods import PodIndex
from vgpu.sim.pods import StaticPods

from .helpers import UUIDS, add_container, container_dir, new_uid, parse, pod, region_bytes, set_old


def series_pods(m) -> set[str]:
    return {lab["pod"] for lab, _ in parse(m.render_metrics()).get("hami_vgpu_memory_used_bytes", [])}


def test_terminal_pod_series_vanish_at_once_and_directory_goes_after_300s(make_monitor, hook, clock):
    # M-6: mark the pod Succeeded -> no series at the next scrape; directory removed after 300 s.
    uid = new_uid()
    add_container(hook, uid, "main", procs=[(1, [5, 0])])
    pods = StaticPods([pod(uid, "job-1", gpus={"main": UUIDS})])
    m = make_monitor(pods)
    m.tick()
    assert series_pods(m) == {"job-1"}
    pods.apply("MODIFIED", pod(uid, "job-1", phase="Succeeded", gpus={"main": UUIDS}))
    assert series_pods(m) == set()
    d = hook / "containers" / f"{uid}_main"
    clock.advance(299)
    assert m.tick().removed == [] and d.is_dir()
    clock.advance(2)
    assert m.tick().removed == [f"{uid}_main"]
    assert not d.exists()
    assert parse(m.render_metrics())["vgpu_monitor_gc_removed_total"] == [({}, 1.0)]


def test_failed_pod_is_terminal_too(make_monitor, hook, clock):
    uid = new_uid()
    add_container(hook, uid, "main", procs=[(1, [5, 0])])
    m = make_monitor(StaticPods([pod(uid, "job", phase="Failed")]))
    clock.advance(301)
    assert m.tick().removed == [f"{uid}_main"]


def test_gone_pod_old_directory_is_removed_young_one_kept(make_monitor, hook, clock):
    old_uid, young_uid = new_uid(), new_uid()
    add_container(hook, old_uid, "main")
    add_container(hook, young_uid, "main")
    set_old(hook / "containers" / f"{old_uid}_main", 400, now=clock())
    m = make_monitor(StaticPods([]))
    assert m.tick().removed == [f"{old_uid}_main"]
    assert (hook / "containers" / f"{young_uid}_main").is_dir()


def test_running_pod_directory_is_never_removed(make_monitor, hook, clock):
    uid = new_uid()
    add_container(hook, uid, "main")
    m = make_monitor(StaticPods([pod(uid, "svc")]))
    clock.advance(10_000)
    assert m.tick().removed == []
    assert m.tick().scan.tracked == 1


def test_nothing_is_removed_before_the_pod_list_is_synced(make_monitor, hook, clock):
    uid = new_uid()
    add_container(hook, uid, "main")
    m = make_monitor(PodIndex())  # never synced
    clock.advance(10_000)
    assert m.tick().removed == []
    assert (hook / "containers" / f"{uid}_main").is_dir()


def test_symlink_entry_is_unlinked_not_followed(make_monitor, hook, tmp_path, clock):
    # M-11: GC removes the link itself only; the target directory and its files stay.
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("host data")
    target_region = add_container(tmp_path / "other-hook", new_uid(), "main")
    before = region_bytes(target_region)
    root = hook / "containers"
    root.mkdir()
    link1 = root / f"{new_uid()}_main"
    link2 = root / f"{new_uid()}_side"
    os.symlink(outside, link1)
    os.symlink(target_region.parent, link2)
    set_old(link1, 1000, now=clock())
    set_old(link2, 1000, now=clock())
    m = make_monitor(StaticPods([]))
    assert sorted(m.tick().removed) == sorted([link1.name, link2.name])
    assert not os.path.lexists(link1) and not os.path.lexists(link2)
    assert (outside / "keep.txt").read_text() == "host data"
    assert region_bytes(target_region) == before


def test_symlink_inside_a_stale_directory_is_not_traversed(make_monitor, hook, tmp_path, clock):
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("host data")
    uid = new_uid()
    d = container_dir(hook, uid, "main")
    os.symlink(outside, d / "escape")
    os.symlink(outside / "keep.txt", d / "x.cache")
    set_old(d, 1000, now=clock())
    m = make_monitor(StaticPods([]))
    assert m.tick().removed == [f"{uid}_main"]
    assert (outside / "keep.txt").read_text() == "host data"


def test_foreign_names_are_never_removed(make_monitor, hook, clock):
    root = hook / "containers"
    root.mkdir()
    for name in ("lost+found", "keep-me", f"{new_uid()}_UPPER"):
        (root / name).mkdir()
        set_old(root / name, 10_000, now=clock())
    m = make_monitor(StaticPods([]))
    assert m.tick().removed == []
    assert len(os.listdir(root)) == 3


def test_tracked_region_fd_is_closed_before_removal(make_monitor, hook, clock):
    uid = new_uid()
    add_container(hook, uid, "main", procs=[(1, [5, 0])])
    pods = StaticPods([pod(uid, "p")])
    m = make_monitor(pods)
    m.tick()
    region = m.discovery.tracked[f"{uid}_main"].region
    pods.apply("DELETED", pod(uid, "p"))
    clock.advance(1000)
    assert m.tick().removed == [f"{uid}_main"]
    assert region.closed
    assert m.discovery.tracked == {}
