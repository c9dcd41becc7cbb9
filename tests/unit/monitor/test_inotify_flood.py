"""A container that renames files in a loop floods the monitor's inotify queue.

The loop drained the queue "until empty", which never came while the renames went on: the loop
thread stalled there and no scan, tick or feedback pass ran for any container.  Each drain is now
bounded (``inotify.MAX_READ_BYTES`` per call), so the loop keeps its period under the flood.
"""

from __future__ import annotations

from tests.conftest import unavailable_here
from vgpu.monitor import inotify
from vgpu.sim.hamicore.hostile import NameSwapper

from .helpers import add_container, container_dir, new_uid, wait_until


@unavailable_here(inotify.Inotify.create() is None, "inotify is not available on this kernel")
def test_a_rename_flood_does_not_stall_the_loop(make_monitor, hook):
    add_container(hook, new_uid(), "main", procs=[(1, [1, 0])])
    d = container_dir(hook, new_uid(), "main")
    (d / "x").write_bytes(b"x")
    (d / "y").write_bytes(b"y")
    m = make_monitor(interval_s=0.2, use_inotify=True)
    m.start()
    wait_until(lambda: m.stats.files_tracked == 1, 5, "the first scan")
    with NameSwapper(d / "x", d / "y"):
        scans = m.stats.scans
        # Ticks (every 0.2 s, each with a scan) and event scans go on while the queue floods.
        wait_until(lambda: m.stats.scans >= scans + 10, 10, "ten more scans")
        assert m.healthy() == (True, "ok")  # the last tick is recent
