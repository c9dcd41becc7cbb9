"""The monitor loop: ticks, inotify-triggered scans, health."""

from __future__ import annotations

import os
import time

from tests.conftest import missing_program, unavailable_here
from vgpu.monitor import core, inotify

from .helpers import add_container, container_dir, new_uid, wait_until, write_region


def test_health_follows_the_loop(make_monitor):
    m = make_monitor(interval_s=0.2)
    assert m.healthy() == (False, "monitor loop is not running")
    m.start()
    wait_until(lambda: m.healthy()[0], 5, "a first tick")
    m.stop()
    assert not m.healthy()[0]


def test_loop_ticks_on_its_period(make_monitor, hook):
    m = make_monitor(interval_s=0.2)
    m.start()
    add_container(hook, new_uid(), "main", procs=[(1, [1, 0])])
    wait_until(lambda: m.stats.files_tracked == 1, 5, "the periodic scan")
    wait_until(lambda: m.stats.feedback_writes["recent_kernel"] >= 2, 5, "feedback on every tick")


@unavailable_here(inotify.Inotify.create() is None, "inotify is not available on this kernel")
def test_inotify_wakes_a_scan_long_before_the_period(make_monitor, hook):
    m = make_monitor(interval_s=60, use_inotify=True)
    m.start()
    wait_until(lambda: m.stats.scans >= 1, 5, "the first tick")
    uid = new_uid()
    d = container_dir(hook, uid, "main")  # root event: the directory appears
    wait_until(lambda: m.stats.directories == 1, 5, "a scan after the root event")
    write_region(d / "a.cache", procs=[(1, [1, 0])])  # directory event: the file appears
    t0 = time.monotonic()
    wait_until(lambda: m.stats.files_tracked == 1, 10, "a scan after the directory event")
    assert time.monotonic() - t0 < 5  # well before the 60 s period


@unavailable_here(inotify.Inotify.create() is None, "inotify is not available on this kernel")
def test_own_file_access_does_not_keep_waking_the_loop(make_monitor, hook, monkeypatch):
    # Bad and initialising files are opened and closed on every scan; that must not trigger more
    # scans, and a file whose creator never sets the magic is retried only a few times.
    monkeypatch.setattr(core, "INITIALISING_RETRY_S", 0.05)
    d = container_dir(hook, new_uid(), "main")
    (d / "bad.cache").write_bytes(b"x" * 2_008_953)
    os.mkfifo(d / "f.cache")
    (d / "init.cache").write_bytes(bytes(2_008_953))
    m = make_monitor(interval_s=60, use_inotify=True)
    m.start()
    wait_until(lambda: m.stats.scans >= 1 + core.INITIALISING_RETRIES, 5, "the initialising retries")
    time.sleep(1.0)  # an observation window (20 retry periods): nothing else may happen in it
    assert m.stats.scans == 1 + core.INITIALISING_RETRIES


class _FakeInotify:
    def __init__(self, events):
        self.events = events
        self.removed: list[int] = []
        self.added: list[str] = []

    def add_watch(self, path, mask):
        self.added.append(path)
        return 7

    def read_events(self):
        events, self.events = self.events, []
        return events

    def rm_watch(self, wd):
        self.removed.append(wd)

    def close(self):
        pass


def test_events_for_junk_names_do_not_wake_a_scan(make_monitor):
    # A tenant churning other files in its directory (or foreign names in the root) bought a scan
    # every 0.25 s: every event woke one.  Only names a scan can care about do now.
    m = make_monitor()
    m._root_wd, m._wd_dirs = 1, {2: "d"}
    uid = new_uid()
    junk = [
        inotify.Event(2, inotify.IN_CREATE, "junk123"),
        inotify.Event(2, inotify.IN_DELETE, "x.tmp"),
        inotify.Event(2, inotify.IN_CREATE, "libvgpu.so.cache"),
        inotify.Event(1, inotify.IN_CREATE, "lost+found"),
        inotify.Event(1, inotify.IN_CREATE, f"{uid}_main\n"),
    ]
    m._inotify = _FakeInotify(list(junk))
    assert m._handle_events() is False
    for wanted in (
        inotify.Event(2, inotify.IN_CREATE, "a.cache"),
        inotify.Event(2, inotify.IN_MOVED_TO, "b.cache"),
        inotify.Event(1, inotify.IN_CREATE, f"{uid}_main"),
        inotify.Event(1, inotify.IN_DELETE, f"{uid}_main"),
        inotify.Event(-1, inotify.IN_Q_OVERFLOW, ""),
        inotify.Event(2, inotify.IN_DELETE_SELF, ""),
    ):
        m._inotify = _FakeInotify([*junk, wanted])
        assert m._handle_events() is True, wanted


def test_reading_events_is_bounded_per_call():
    ino = inotify.Inotify.create()
    if ino is None:
        missing_program("inotify is not available on this kernel")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        ino.add_watch(d, inotify.IN_CREATE)
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        for i in range(400):
            os.close(os.open(f"junk-{i:04}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        os.close(fd)
        first = ino.read_events(max_bytes=4096)
        rest = ino.read_events()
        assert 0 < len(first) < 400 and len(first) + len(rest) == 400
    ino.close()


def test_a_directory_churning_junk_is_not_watched_for_a_while(make_monitor, monkeypatch):
    # Each junk event still cost a wakeup and a parse (30 % CPU while a tenant churned files);
    # a directory that sends NOISY_EVENTS of them in one period loses its watch for QUIET_S.
    m = make_monitor()
    fake = _FakeInotify([inotify.Event(2, inotify.IN_CREATE, f"junk{i}") for i in range(core.NOISY_EVENTS)])
    m._inotify, m._root_wd, m._wd_dirs, m._dir_wds = fake, 1, {2: "d"}, {"d": 2}
    assert m._handle_events() is False
    assert fake.removed == [2]
    fake.events = [inotify.Event(2, inotify.IN_IGNORED, "")]
    assert m._handle_events() is True  # one scan for the dropped watch
    m._watch_dir("d", 0)
    assert fake.added == []  # still quiet
    monkeypatch.setattr(core, "QUIET_S", 0.0)
    m._quiet_until["d"] = time.monotonic() - 1
    m._watch_dir("d", 0)
    assert fake.added == ["/proc/self/fd/0"]
