"""The open rule (docs/hami-core.md §8): nothing but a verified regular file is ever opened for I/O.

A container owns its cache directory and can swap the name the monitor is opening for a device
node or a FIFO at any instant.  An open that checks the name first and opens it afterwards loses
that race now and then and opens the decoy, read-write, from a privileged process.  These tests
swap the names as fast as the kernel allows while opening them in a loop, and watch the decoy's
inode for any open.
"""

from __future__ import annotations

import os
import stat
import time

import pytest

from tests.conftest import unavailable_here
from tests.unit.hamicore import scenario
from vgpu.hamicore.region import Region, RegionError, RegionErrorCode
from vgpu.sim.hamicore.hostile import NameSwapper, OpenWatch

ATTEMPTS = 4000
SECONDS = 20.0


def make_decoy(path, kind: str) -> None:
    if kind == "chardev":  # /dev/zero's numbers: harmless even if it were opened
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    else:
        raise ValueError(kind)


needs_root = unavailable_here(os.geteuid() != 0, "mknod of a device node needs root (CI runs as root)")


@pytest.mark.parametrize("kind", [pytest.param("chardev", marks=needs_root), "fifo"])
def test_a_decoy_is_refused_without_being_opened(tmp_path, kind):
    decoy = tmp_path / "a.cache"
    make_decoy(decoy, kind)
    with OpenWatch(decoy) as watch:
        for writable in (False, True):
            with pytest.raises(RegionError) as info:
                Region.open(decoy, writable=writable)
            assert info.value.code is RegionErrorCode.NOT_REGULAR
            assert ("character device" if kind == "chardev" else "FIFO") in str(info.value)
        assert watch.count() == 0


@pytest.mark.parametrize("kind", [pytest.param("chardev", marks=needs_root), "fifo"])
def test_a_name_swapped_for_a_decoy_never_gets_the_decoy_opened(tmp_path, kind):
    good = scenario.standard_region(tmp_path / "a.cache", "v1.2")
    decoy = tmp_path / "decoy"
    make_decoy(decoy, kind)
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    outcomes: dict[str, int] = {}
    try:
        with OpenWatch(decoy) as watch, OpenWatch(good) as real, NameSwapper(good, decoy):
            deadline = time.monotonic() + SECONDS
            attempts = 0
            while attempts < ATTEMPTS and time.monotonic() < deadline and not watch.count():
                attempts += 1
                try:
                    with Region.open("a.cache", dir_fd=dfd, writable=bool(attempts & 1)) as region:
                        region.read()
                    key = "decoded"
                except RegionError as exc:
                    key = exc.code.name
                outcomes[key] = outcomes.get(key, 0) + 1
            opened = watch.count()
            real_opens = real.count()
    finally:
        os.close(dfd)
    print(f"{attempts} attempts: {outcomes}; decoy opened {opened} times, the region {real_opens}")
    assert opened == 0, f"the {kind} was opened {opened} times in {attempts} attempts ({outcomes})"
    # Both sides of the race were hit, so the loop really raced (and the region was opened).
    assert outcomes.get("decoded", 0) > 0 and outcomes.get("NOT_REGULAR", 0) > 0, outcomes
    assert set(outcomes) <= {"decoded", "NOT_REGULAR", "NOT_FOUND", "SIZE", "SHORT_READ", "RACE"}, outcomes
    assert real_opens >= 1  # inotify merges repeated events, so this counts "some", not each
