"""The real `vgpu monitor` against hostile container directories (docs/metrics.md §6.3).

A finished pod's directory is the tenant's to fill: a 1,000-deep tree or a FIFO swapped in for a
subdirectory must not stop the tick (GC, scan, feedback for everybody else) nor /healthz, and the
stale directory still goes.
"""

from __future__ import annotations

import os
import pathlib
import struct
import subprocess

from tests.unit.monitor.helpers import add_container, container_dir, new_uid, parse, set_old, wait_until
from vgpu.sim.hamicore.hostile import SWAP_TO_FIFO_HOOK, deep_tree

from .conftest import create_pod, set_phase

SCAN_S = 5.0
ONE_SCAN = SCAN_S + 2.0
RECENT_KERNEL_OFFSET = 2_008_904  # v1.x


def recent_kernel(path: pathlib.Path) -> int:
    with open(path, "rb") as f:
        f.seek(RECENT_KERNEL_OFFSET)
        return int(struct.unpack("<i", f.read(4))[0])


def block(path: pathlib.Path) -> None:
    """What a tick left behind for a container that was blocked: ``recent_kernel = -1``."""
    with open(path, "r+b") as f:
        f.seek(RECENT_KERNEL_OFFSET)
        f.write(struct.pack("<i", -1))


def rm_rf(path: pathlib.Path) -> None:
    subprocess.run(["rm", "-rf", "--", str(path)], check=False)


def stale_deep_dir(hook: pathlib.Path, uid: str | None = None, depth: int = 1000) -> pathlib.Path:
    d = container_dir(hook, uid or new_uid(), "main")  # a finished or gone pod's: stale once 300 s old
    deep_tree(d, depth, leaf="leaf.cache")
    set_old(d, 1000)
    return d


def assert_feedback_and_health_keep_going(mon, region: pathlib.Path, rounds: int = 2) -> None:
    for i in range(rounds):
        block(region)
        wait_until(lambda: recent_kernel(region) == 0, ONE_SCAN, f"the blocked container's release (round {i})")
        status, body, _ = mon.get("/healthz")
        assert status == 200, body


def test_a_deep_tree_appearing_while_running_stops_neither_ticks_nor_health(apiserver, start_monitor, hook):
    good = add_container(hook, create_pod(apiserver, "good")["metadata"]["uid"], "main", procs=[(1, [5, 0])])
    finished = create_pod(apiserver, "finished")
    set_phase(apiserver, finished, "Succeeded")
    mon = start_monitor()
    d = stale_deep_dir(hook, finished["metadata"]["uid"])
    try:
        assert_feedback_and_health_keep_going(mon, good, rounds=3)
        wait_until(lambda: not os.path.lexists(d), 4 * ONE_SCAN, "the deep tree to be removed")
        s = parse(mon.scrape())
        assert s["vgpu_monitor_gc_removed_total"] == [({}, 1.0)]
        assert all(v == 0 for _, v in s["vgpu_monitor_item_errors_total"])
        assert "RecursionError" not in mon.log()
    finally:
        rm_rf(d)


def test_a_fifo_swapped_in_for_a_subdirectory_never_blocks_the_monitor(apiserver, start_monitor, hook, nvml, tmp_path):
    good = add_container(hook, create_pod(apiserver, "good")["metadata"]["uid"], "main", procs=[(1, [5, 0])])
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SWAP_TO_FIFO_HOOK)
    d = container_dir(hook, new_uid(), "main")
    target = d / "sub" / "swap-me-into-a-fifo"
    env = {
        **nvml.env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
        "VGPU_TEST_SWAP_TO_FIFO": str(target),
    }
    mon = start_monitor(nvml_env=env)
    target.mkdir(parents=True)
    set_old(d, 1000)
    try:
        wait_until(lambda: target.is_fifo() or not os.path.lexists(d), 2 * ONE_SCAN, "GC to reach the swapped entry")
        assert_feedback_and_health_keep_going(mon, good, rounds=2)
        assert parse(mon.scrape())["vgpu_monitor_files_tracked"] == [({}, 1.0)]
        wait_until(lambda: not os.path.lexists(d), 2 * ONE_SCAN, "the stale directory to be removed")
    finally:
        if target.is_fifo():  # a monitor blocked in open() (the bug): give it a writer so it can stop
            try:
                os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        rm_rf(d)


def test_a_monitor_started_with_a_deep_tree_present_serves_and_removes_it(apiserver, start_monitor, hook):
    good = add_container(hook, create_pod(apiserver, "good")["metadata"]["uid"], "main", procs=[(1, [5, 0])])
    d = stale_deep_dir(hook)
    try:
        mon = start_monitor()  # its first tick (GC first) runs before it serves
        assert not os.path.lexists(d)
        assert_feedback_and_health_keep_going(mon, good, rounds=1)
    finally:
        rm_rf(d)
