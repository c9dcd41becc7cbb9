"""Discovery of region files: selection, bounds and hostile directories (docs/metrics.md §6.1, M-3, M-10, M-11)."""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import struct
import time

from vgpu.hamicore.paths import HostLayout, container_cache_file, prepare_container_dir
from vgpu.monitor.discovery import MAX_ROOT_ENTRIES
from vgpu.sim.hamicore.writer import RegionWriter

from .helpers import UUIDS, add_container, container_dir, new_uid, parse, region_bytes, set_old, write_region

V12_SIZE = 2_008_953


def tracked_files(m) -> dict[str, str]:
    return {name: t.file_name for name, t in m.discovery.tracked.items()}


def used_series(m) -> list[dict]:
    return [lab for lab, _ in parse(m.render_metrics()).get("hami_vgpu_memory_used_bytes", [])]


def test_containers_appear_and_disappear_within_one_scan(make_monitor, hook):
    m = make_monitor()
    assert m.scan().tracked == 0
    uid = new_uid()
    add_container(hook, uid, "main", procs=[(1, [5, 6])])
    result = m.scan()
    assert result.added == [f"{uid}_main"] and result.tracked == 1
    assert {lab["pod"] for lab in used_series(m)} == {uid}
    shutil.rmtree(hook / "containers" / f"{uid}_main")
    result = m.scan()
    assert result.dropped == [f"{uid}_main"] and result.tracked == 0
    assert used_series(m) == []


def test_newest_valid_file_wins_among_bad_ones(make_monitor, hook):
    # M-3: three files: one truncated, one of a foreign size, one valid -> the valid one, whatever the order.
    uid = new_uid()
    d = container_dir(hook, uid, "main")
    write_region(d / "valid.cache", procs=[(1, [7, 0])])
    write_region(d / "truncated.cache", procs=[(1, [9, 0])])
    os.truncate(d / "truncated.cache", 1_000_000)
    (d / "foreign.cache").write_bytes(b"\x4e\xf7\x2f\x01" + bytes(4000))
    now = time.time()
    os.utime(d / "valid.cache", (now - 60, now - 60))  # the bad ones are newer
    m = make_monitor()
    result = m.scan()
    assert tracked_files(m) == {f"{uid}_main": "valid.cache"}
    assert result.rejected == {"size": 2}
    assert parse(m.render_metrics())["hami_vgpu_memory_used_bytes"][0][1] == 7 * 2**20


def test_the_newest_of_two_valid_files_is_selected_and_reselected(make_monitor, hook):
    uid = new_uid()
    d = container_dir(hook, uid, "main")
    write_region(d / "old.cache", procs=[(1, [1, 0])])
    write_region(d / "new.cache", procs=[(1, [2, 0])])
    now = time.time()
    os.utime(d / "old.cache", (now - 100, now - 100))
    os.utime(d / "new.cache", (now - 50, now - 50))
    m = make_monitor()
    m.scan()
    assert tracked_files(m) == {f"{uid}_main": "new.cache"}
    os.utime(d / "old.cache", (now, now))  # another file is now the newest
    m.scan()
    assert tracked_files(m) == {f"{uid}_main": "old.cache"}
    assert parse(m.render_metrics())["hami_vgpu_memory_used_bytes"][0][1] == 1 * 2**20


def test_initialising_file_is_not_an_error_and_is_picked_up_once_ready(make_monitor, hook):
    uid = new_uid()
    d = container_dir(hook, uid, "main")
    write_region(d / "old.cache", procs=[(1, [1, 0])])
    past = time.time() - 100
    os.utime(d / "old.cache", (past, past))
    with open(d / "new.cache", "wb") as f:  # created and sized, magic not stored yet
        f.truncate(V12_SIZE)
    m = make_monitor()
    result = m.scan()
    assert result.initialising == 1 and result.rejected == {}
    assert tracked_files(m) == {f"{uid}_main": "old.cache"}
    write_region(d / "new.cache", procs=[(1, [3, 0])])  # the creator finishes: magic set
    m.scan()
    assert tracked_files(m) == {f"{uid}_main": "new.cache"}


def test_only_initialising_means_not_tracked_yet(make_monitor, hook):
    d = container_dir(hook, new_uid(), "main")
    with open(d / "a.cache", "wb") as f:
        f.truncate(V12_SIZE)
    m = make_monitor()
    assert m.scan().tracked == 0


def test_symlinked_directory_is_skipped_and_counted(make_monitor, hook, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = write_region(outside / "a.cache", procs=[(1, [5, 0])])
    before = region_bytes(target)
    (hook / "containers").mkdir()
    os.symlink(outside, hook / "containers" / f"{new_uid()}_main")
    add_container(hook, new_uid(), "ok", procs=[(1, [1, 0])])
    m = make_monitor()
    result = m.tick()
    assert result.scan.rejected == {"dir_symlink": 1}
    assert result.scan.tracked == 1  # the other container keeps reporting
    assert region_bytes(target) == before  # never opened, never written
    s = parse(m.render_metrics())
    assert nonzero(s["vgpu_monitor_files_rejected"]) == [({"reason": "dir_symlink"}, 1.0)]
    assert nonzero(s["vgpu_monitor_files_rejected_total"]) == [({"reason": "dir_symlink"}, 1.0)]


def test_symlinked_cache_file_is_rejected_and_its_target_untouched(make_monitor, hook, tmp_path):
    target = write_region(tmp_path / "host-file.cache", procs=[(1, [5, 0])])
    before = region_bytes(target)
    d = container_dir(hook, new_uid(), "main")
    os.symlink(target, d / "a.cache")
    good = add_container(hook, new_uid(), "ok", procs=[(1, [1, 0])])
    m = make_monitor()
    for _ in range(2):
        result = m.tick()
    assert result.scan.rejected == {"symlink": 1} and result.scan.tracked == 1
    assert region_bytes(target) == before
    assert region_bytes(good) != b""  # the good one is tracked and fed back
    # counted once per file, although it is seen on every scan
    assert nonzero(parse(m.render_metrics())["vgpu_monitor_files_rejected_total"]) == [({"reason": "symlink"}, 1.0)]


def test_fifo_named_cache_never_blocks(make_monitor, hook):
    d = container_dir(hook, new_uid(), "main")
    os.mkfifo(d / "x.cache")
    m = make_monitor()
    t0 = time.monotonic()
    result = m.tick().scan
    assert time.monotonic() - t0 < 2
    assert result.rejected == {"not_regular": 1} and result.tracked == 0


def test_hard_link_to_a_host_file_is_neither_read_as_region_nor_written(make_monitor, hook, tmp_path):
    host_file = tmp_path / "host.bin"
    host_file.write_bytes(b"\x7fELF" + bytes(V12_SIZE - 4))  # right size, no magic
    d = container_dir(hook, new_uid(), "main")
    os.link(host_file, d / "a.cache")
    m = make_monitor()
    result = m.tick().scan
    assert result.rejected == {"magic": 1} and result.tracked == 0
    assert host_file.read_bytes()[:4] == b"\x7fELF" and len(host_file.read_bytes()) == V12_SIZE


def test_huge_counts_are_clamped_without_hanging(make_monitor, hook):
    # M-11: proc_num = 2^31-1 and device_num = 2^63 -> bounded work, sane output.
    path = add_container(hook, new_uid(), "main", procs=[(1, [5, 6])])
    with open(path, "r+b") as f:
        f.seek(56)
        f.write(struct.pack("<Q", 2**63))  # device_num (v1.x)
        f.seek(2_008_896)
        f.write(struct.pack("<i", 2**31 - 1))  # proc_num (v1.x)
    m = make_monitor()
    t0 = time.monotonic()
    m.tick()
    s = parse(m.render_metrics())
    assert time.monotonic() - t0 < 2
    assert sorted(lab["vdevice_index"] for lab, _ in s["hami_vgpu_memory_used_bytes"]) == ["0", "1"]
    assert sorted(v for _, v in s["hami_vgpu_memory_used_bytes"]) == [5 * 2**20, 6 * 2**20]


def test_non_ascii_uuid_is_skipped(make_monitor, hook):
    path = add_container(hook, new_uid(), "main", procs=[(1, [5, 6])])
    with open(path, "r+b") as f:
        f.seek(64 + 96)  # uuids[1] (v1.x)
        f.write("GPU-é".encode() + b"\0")
    m = make_monitor()
    m.scan()
    assert [lab["device_uuid"] for lab in used_series(m)] == [UUIDS[0]]


def test_foreign_names_are_ignored(make_monitor, hook):
    root = hook / "containers"
    root.mkdir()
    for name in ("lost+found", "not-a-uid_main", f"{new_uid()}_Upper", f"{new_uid()}_main_extra", "x"):
        d = root / name
        d.mkdir()
        write_region(d / "a.cache", procs=[(1, [1, 0])])
    m = make_monitor()
    result = m.scan()
    assert result.directories == 0 and result.tracked == 0 and result.entries == 5


def test_a_name_with_a_trailing_newline_is_foreign(make_monitor, hook, clock):
    # `^...$` with re.match accepted "<uid>_main\n" as container "main": a second, tenant-named
    # entry for the same container.  It is neither tracked nor ever removed.
    uid = new_uid()
    d = hook / "containers" / f"{uid}_main\n"
    d.mkdir(parents=True)
    write_region(d / "a.cache", procs=[(1, [1, 0])])
    set_old(d, 10_000, now=clock())
    m = make_monitor()
    result = m.tick()
    assert result.scan.directories == 0 and result.scan.tracked == 0 and result.removed == []
    assert d.is_dir()


def test_at_most_16_cache_entries_per_directory(make_monitor, hook):
    d = container_dir(hook, new_uid(), "main")
    for i in range(40):
        (d / f"{i:02}.cache").write_bytes(b"junk")
    m = make_monitor()
    assert m.scan().rejected == {"size": 16}


def test_at_most_4096_root_entries_per_scan(make_monitor, hook):
    root = hook / "containers"
    root.mkdir()
    for i in range(MAX_ROOT_ENTRIES + 10):
        (root / f"f{i}").touch()
    m = make_monitor()
    result = m.scan()
    assert result.entries == MAX_ROOT_ENTRIES and result.truncated


def test_libvgpu_entries_are_ignored(make_monitor, hook):
    d = container_dir(hook, new_uid(), "main")
    (d / "libvgpu.so").touch()  # the empty mount point of HAMi layouts
    write_region(d / "libvgpu.so.cache", procs=[(1, [1, 0])])
    m = make_monitor()
    result = m.scan()
    assert result.tracked == 0 and result.rejected == {}


def test_root_symlink_skips_the_scan(make_monitor, hook, tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir()
    os.symlink(real, hook / "containers")
    m = make_monitor()
    result = m.scan()
    assert not result.ok and "symbolic link" in result.error
    assert parse(m.render_metrics())["vgpu_monitor_scan_failures_total"] == [({}, 1.0)]


def test_missing_root_is_created_0700(make_monitor, hook):
    old = os.umask(0o022)  # whatever the umask, the mode is the plugin's 0700 (root's alone)
    try:
        m = make_monitor()
        assert m.scan().ok
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(hook / "containers").st_mode) == 0o700


def test_truncated_while_tracked_is_invalid_for_that_scrape(make_monitor, hook):
    # M-10: no crash; the region is invalid this time, the others keep reporting; next scan drops it.
    bad = add_container(hook, bad_uid := new_uid(), "main", procs=[(1, [5, 0])])
    add_container(hook, good_uid := new_uid(), "main", procs=[(1, [6, 0])])
    m = make_monitor()
    m.tick()
    os.truncate(bad, 4096)
    s = parse(m.render_metrics())
    assert {lab["pod"] for lab, _ in s["hami_vgpu_memory_used_bytes"]} == {good_uid}
    assert nonzero(s["vgpu_monitor_region_read_errors_total"]) == [({"reason": "size"}, 1.0)]
    result = m.tick().scan
    assert result.dropped == [f"{bad_uid}_main"] and result.rejected == {"size": 1}
    os.truncate(bad, 0)
    m.tick()  # feedback never writes a truncated file
    assert os.path.getsize(bad) == 0


def test_file_replaced_by_another_layout_is_reselected(make_monitor, hook):
    uid = new_uid()
    path = add_container(hook, uid, "main", procs=[(1, [5, 0])])
    m = make_monitor()
    m.scan()
    os.unlink(path)
    write_region(path, variant="v0", procs=[(1, [9, 0])])
    result = m.scan()
    assert result.added == [f"{uid}_main"]
    assert m.discovery.tracked[f"{uid}_main"].size == 1_197_897
    assert parse(m.render_metrics())["hami_vgpu_memory_used_bytes"][0][1] == 9 * 2**20


def test_writer_keeps_working_on_the_tracked_file(make_monitor, hook):
    # usage changes between scrapes are visible at once: regions are read at scrape time
    uid = new_uid()
    path = add_container(hook, uid, "main", procs=[(1, [5, 0])])
    m = make_monitor()
    m.scan()
    w = RegionWriter.create(path, "v1.2", env={})
    w.add_memory(1, 0, 2**20)
    w.close()
    assert parse(m.render_metrics())["hami_vgpu_memory_used_bytes"][0][1] == 6 * 2**20


def test_plugin_and_monitor_share_one_containers_root(make_monitor, hook, tmp_path):
    # M-1: the directory Allocate prepares and the file HAMi-core creates in it are what the monitor scans.
    layout = HostLayout(str(hook), vgpulock_dir=str(tmp_path / "vgpulock"))
    uid = new_uid()
    prepare_container_dir(layout, uid, "main")
    cache_uuid = "5b0a8c2e-3f1d-4e7a-9c6b-1d2e3f4a5b6c"
    assert container_cache_file(cache_uuid) == f"/tmp/vgpu/{cache_uuid}.cache"  # what the container is told
    write_region(pathlib.Path(layout.host_cache_file(uid, "main", cache_uuid)), procs=[(1, [3, 0])])
    m = make_monitor()
    assert m.containers_root == layout.containers_root
    assert m.scan().added == [f"{uid}_main"]
    assert [lab["pod"] for lab in used_series(m)] == [uid, uid]


def test_a_rejected_file_replaced_by_another_bad_one_is_counted_again(make_monitor, hook):
    d = container_dir(hook, new_uid(), "main")
    (d / "a.cache").write_bytes(bytes(V12_SIZE))  # magic 0: initialising, not an error
    write_region(d / "b.cache", procs=[(1, [1, 0])])
    with open(d / "b.cache", "r+b") as f:
        f.write(b"\xff\xff\xff\xff")
    m = make_monitor()
    m.scan()
    m.scan()
    assert m.stats.rejected_total == {"magic": 1}
    write_region(d / "b.tmp", procs=[(1, [1, 0])])  # a new inode, renamed over the old name
    with open(d / "b.tmp", "r+b") as f:
        f.write(b"\xff\xff\xff\xfe")
    os.replace(d / "b.tmp", d / "b.cache")
    m.scan()
    assert m.stats.rejected_total == {"magic": 2}


def junk(d: pathlib.Path, n: int) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(n):
            os.close(os.open(f"junk{i}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


class CountingScandir:
    """Wraps os.scandir and counts the entries each listing handed out."""

    def __init__(self, real):
        self.real = real
        self.counts: list[int] = []

    def __call__(self, *args):
        real_it = self.real(*args)
        counts, i = self.counts, len(self.counts)
        counts.append(0)

        class It:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                real_it.close()

            def __iter__(self):
                return self

            def __next__(self):
                entry = next(real_it)
                counts[i] += 1
                return entry

            def close(self):
                real_it.close()

        return It()


def test_a_directory_full_of_junk_costs_a_bounded_scan(make_monitor, hook, monkeypatch):
    # Non-.cache names were not capped: 300,000 junk files made every scan walk them all.
    from vgpu.monitor.discovery import MAX_DIR_ENTRIES

    d = container_dir(hook, new_uid(), "main")
    junk(d, MAX_DIR_ENTRIES * 8)
    m = make_monitor()
    spy = CountingScandir(os.scandir)
    monkeypatch.setattr(os, "scandir", spy)
    result = m.scan()
    monkeypatch.undo()
    assert result.truncated_dirs == 1
    assert max(spy.counts) <= MAX_DIR_ENTRIES + 1  # the root's listing and this directory's, each capped
    s = parse(m.render_metrics())
    assert {lab["where"]: v for lab, v in s["vgpu_monitor_truncated_listings"]} == {"root": 0.0, "container_dir": 1.0}


def test_the_tracked_file_is_kept_whatever_junk_comes_after_it(make_monitor, hook):
    from vgpu.monitor.discovery import MAX_DIR_ENTRIES

    uid = new_uid()
    add_container(hook, uid, "main", procs=[(1, [5, 0])])
    m = make_monitor()
    assert m.scan().tracked == 1
    junk(hook / "containers" / f"{uid}_main", MAX_DIR_ENTRIES * 4)
    for _ in range(2):
        result = m.scan()
        assert result.tracked == 1 and result.dropped == [] and result.truncated_dirs == 1
    assert {lab["pod"] for lab in used_series(m)} == {uid}


def test_truncation_gauges_are_zero_from_the_start(make_monitor):
    s = parse(make_monitor().render_metrics())
    assert {lab["where"]: v for lab, v in s["vgpu_monitor_truncated_listings"]} == {"root": 0.0, "container_dir": 0.0}
    for name in ("vgpu_monitor_gc_deferred_total", "vgpu_monitor_gc_pending", "vgpu_monitor_http_connections"):
        assert s[name] == [({}, 0.0)]
    assert {lab["stage"]: v for lab, v in s["vgpu_monitor_item_errors_total"]} == {"gc": 0, "scan": 0, "feedback": 0}
    assert s["vgpu_monitor_http_connections_refused_total"] == [({}, 0.0)]
    assert {lab["reason"]: v for lab, v in s["vgpu_monitor_http_connections_dropped_total"]} == {
        "evicted": 0.0,
        "timeout": 0.0,
    }


def nonzero(rows):
    """The rows of a labelled self-metric that moved (every known label value is present at 0)."""
    return [(lab, v) for lab, v in rows if v]
