"""Garbage collection of stale container directories (docs/metrics.md §6.3, M-6, M-11) on a fake clock."""

from __future__ import annotations

import os
import subprocess

import pytest

from vgpu.monitor.pods import PodIndex
from vgpu.sim.hamicore.hostile import deep_tree
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


def junk(d, n: int) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(n):
            os.close(os.open(f"junk{i}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


@pytest.fixture
def deep_cleanup(hook):
    """pytest removes tmp_path with shutil.rmtree, which a 1,000-deep tree left by a failure breaks."""
    yield
    subprocess.run(["rm", "-rf", "--", str(hook)], check=False)


def test_a_1000_deep_tree_is_removed_and_the_tick_goes_on(make_monitor, hook, clock, deep_cleanup):
    # shutil.rmtree recursed once per level: RecursionError on every tick, for the whole node.
    good = new_uid()
    add_container(hook, good, "main", procs=[(1, [5, 0])])
    d = container_dir(hook, new_uid(), "main")
    deep_tree(d, 1000)
    set_old(d, 1000, now=clock())
    m = make_monitor(StaticPods([pod(good, "good")]))
    result = m.tick()
    assert result.removed == [d.name] and not os.path.lexists(d)
    assert result.scan.tracked == 1 and result.writes
    s = parse(m.render_metrics())
    assert {lab["stage"]: v for lab, v in s["vgpu_monitor_item_errors_total"]} == {"gc": 0, "scan": 0, "feedback": 0}


def test_a_huge_directory_is_removed_over_several_ticks_within_the_budget(make_monitor, hook, clock, monkeypatch):
    from vgpu.monitor import discovery

    monkeypatch.setattr(discovery, "GC_WORK_BUDGET", 100)
    d = container_dir(hook, new_uid(), "main")
    junk(d, 450)
    set_old(d, 1000, now=clock())
    m = make_monitor(StaticPods([]))
    ticks = 0
    while os.path.lexists(d):
        removed = m.tick().removed
        ticks += 1
        assert ticks <= 10
        if os.path.lexists(d):
            assert removed == [] and 0 < len(os.listdir(d)) < 450
            s = parse(m.render_metrics())
            assert s["vgpu_monitor_gc_pending"] == [({}, 1.0)]
            # removing entries refreshed its mtime: it is continued anyway, not "young" again
            assert os.lstat(d).st_mtime > clock() - 300
    assert ticks >= 5 and removed == [d.name]
    s = parse(m.render_metrics())
    assert s["vgpu_monitor_gc_pending"] == [({}, 0.0)]
    assert s["vgpu_monitor_gc_deferred_total"] == [({}, float(ticks - 1))]
    assert s["vgpu_monitor_gc_removed_total"] == [({}, 1.0)]


def test_an_entry_being_removed_is_not_scanned(make_monitor, hook, clock, monkeypatch):
    from vgpu.monitor import discovery

    monkeypatch.setattr(discovery, "GC_WORK_BUDGET", 5)
    uid = new_uid()
    region = add_container(hook, uid, "main", procs=[(1, [5, 0])])
    junk(region.parent, 50)
    set_old(region.parent, 1000, now=clock())
    m = make_monitor(StaticPods([]))
    result = m.tick()
    assert result.removed == [] and os.path.lexists(region.parent)
    assert result.scan.tracked == 0 and m.discovery.tracked == {}


def test_one_failing_entry_never_stops_gc_nor_the_tick(make_monitor, hook, clock, monkeypatch, caplog):
    from vgpu.monitor import discovery

    bad, other, good = new_uid(), new_uid(), new_uid()
    for uid in (bad, other):
        set_old(container_dir(hook, uid, "main"), 1000, now=clock())
    add_container(hook, good, "main", procs=[(1, [5, 0])])
    real = discovery.remove_entry

    def remove_entry(parent_fd, name, budget):
        if name.startswith(bad):
            raise RecursionError("maximum recursion depth exceeded")
        return real(parent_fd, name, budget)

    monkeypatch.setattr(discovery, "remove_entry", remove_entry)
    m = make_monitor(StaticPods([pod(good, "good")]))
    result = m.tick()
    assert result.removed == [f"{other}_main"]
    assert result.scan.tracked == 1 and result.writes
    assert f"{bad}_main" in caplog.text and "RecursionError" in caplog.text
    s = parse(m.render_metrics())
    assert {lab["stage"]: v for lab, v in s["vgpu_monitor_item_errors_total"]}["gc"] == 1.0


def test_a_failing_part_of_the_tick_never_stops_the_others(make_monitor, hook, monkeypatch):
    uid = new_uid()
    add_container(hook, uid, "main", procs=[(1, [5, 0])])
    m = make_monitor(StaticPods([pod(uid, "p")]))

    def broken(*_a, **_kw):
        raise RuntimeError("boom")

    monkeypatch.setattr(m.discovery, "collect_garbage", broken)
    result = m.tick()
    assert result.scan.tracked == 1 and result.writes
    assert m.stats.last_tick_monotonic > 0
    monkeypatch.setattr(m.discovery, "scan", broken)
    result = m.tick()
    assert not result.scan.ok
    s = parse(m.render_metrics())
    assert {lab["stage"]: v for lab, v in s["vgpu_monitor_item_errors_total"]} == {
        "gc": 2.0,
        "scan": 1.0,
        "feedback": 0,
    }


def test_a_fifo_swapped_in_for_a_subdirectory_never_blocks_gc(make_monitor, hook, clock, monkeypatch):
    # Between the listing (a directory) and the open, the tenant puts a FIFO there: a plain
    # O_RDONLY open (shutil.rmtree) waits for a writer forever, and so does the whole tick.
    import threading

    d = container_dir(hook, new_uid(), "main")
    (d / "sub" / "swap").mkdir(parents=True)
    set_old(d, 1000, now=clock())
    real_open = os.open
    fifos = []

    def swapping_open(path, flags, mode=0o777, *, dir_fd=None):
        if path == "swap" and not fifos:
            os.rmdir("swap", dir_fd=dir_fd)
            os.mkfifo("swap", dir_fd=dir_fd)
            fifos.append(d / "sub" / "swap")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", swapping_open)
    m = make_monitor(StaticPods([]))
    done = []
    t = threading.Thread(target=lambda: done.append(m.tick()), daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # release the blocked open so the test process can end
        fd = real_open(fifos[0], os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(5)
    assert done, "the tick blocked on the FIFO"
    assert fifos and done[0].removed == [d.name] and not os.path.lexists(d)
