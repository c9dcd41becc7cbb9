"""vgpu.monitor.rmtree: iterative, bounded, descriptor-relative removal of a tenant's tree (docs/metrics.md §6.3)."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from vgpu.monitor import rmtree
from vgpu.monitor.rmtree import Budget, Outcome, remove_entry


def deep_tree(top: pathlib.Path, depth: int, files: int = 1) -> None:
    """``top/d/d/.../d`` through descriptors, ``files`` files at every level."""
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            for i in range(files):
                os.close(os.open(f"f{i}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)


@pytest.fixture
def parent(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)
    # pytest removes tmp_path with shutil.rmtree, which a deep tree left by a failure breaks
    subprocess.run(["rm", "-rf", "--", str(tmp_path)], check=False)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_tree_deeper_than_the_recursion_limit_goes_in_one_call(tmp_path, parent):
    deep_tree(tmp_path / "t", 3000)
    before = open_fds()
    r = remove_entry(parent, "t", Budget(10**6))
    assert r.outcome is Outcome.DONE and r.error == ""
    assert r.removed == 3000 * 2 + 1
    assert not (tmp_path / "t").exists()
    assert open_fds() == before


def test_the_budget_splits_the_work_and_every_call_resumes(tmp_path, parent):
    deep_tree(tmp_path / "t", 300, files=3)
    calls = 0
    while True:
        budget = Budget(100)
        r = remove_entry(parent, "t", budget)
        calls += 1
        assert budget.left >= 0
        if r.outcome is not Outcome.DEFERRED:
            break
        assert calls < 100
    assert r.outcome is Outcome.DONE and calls > 5
    assert not (tmp_path / "t").exists()


def test_descriptors_stay_bounded_whatever_the_depth(tmp_path, parent, monkeypatch):
    monkeypatch.setattr(rmtree, "MAX_DEPTH", 4)
    deep_tree(tmp_path / "t", 200, files=2)
    peak = 0
    real_open = os.open

    def counting_open(*a, **kw):
        nonlocal peak
        peak = max(peak, open_fds())
        return real_open(*a, **kw)

    monkeypatch.setattr(os, "open", counting_open)
    before = open_fds()
    assert remove_entry(parent, "t", Budget(10**6)).outcome is Outcome.DONE
    assert peak <= before + 2 * 4 + 2  # a descriptor and a listing per open level
    assert os.listdir(tmp_path) == []


def test_symlinks_are_unlinked_never_followed(tmp_path, parent):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("host data")
    t = tmp_path / "t"
    (t / "sub").mkdir(parents=True)
    os.symlink(outside, t / "sub" / "dirlink")
    os.symlink(outside / "keep", t / "filelink")
    r = remove_entry(parent, "t", Budget(1000))
    assert r.outcome is Outcome.DONE
    assert (outside / "keep").read_text() == "host data"
    # the entry itself a symlink: the link goes, its target stays
    os.symlink(outside, tmp_path / "t")
    assert remove_entry(parent, "t", Budget(10)).outcome is Outcome.DONE
    assert (outside / "keep").read_text() == "host data"


def test_fifos_and_sockets_are_unlinked_never_opened(tmp_path, parent):
    t = tmp_path / "t"
    t.mkdir()
    os.mkfifo(t / "fifo")
    os.mkfifo(tmp_path / "topfifo")
    assert remove_entry(parent, "t", Budget(100)).outcome is Outcome.DONE
    assert remove_entry(parent, "topfifo", Budget(100)).outcome is Outcome.DONE


def test_a_fifo_swapped_in_for_a_subdirectory_after_the_listing_does_not_block(tmp_path, parent, monkeypatch):
    # The listing said "directory"; by the time it is opened it is a FIFO (no writer: a plain
    # O_RDONLY open would wait forever).  O_DIRECTORY|O_NONBLOCK fails at once and it is unlinked.
    t = tmp_path / "t"
    (t / "swap").mkdir(parents=True)
    real_open = os.open
    swapped = []

    def swapping_open(path, flags, mode=0o777, *, dir_fd=None):
        if path == "swap" and not swapped:
            swapped.append(flags)
            os.rmdir("swap", dir_fd=dir_fd)
            os.mkfifo("swap", dir_fd=dir_fd)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", swapping_open)
    assert remove_entry(parent, "t", Budget(100)).outcome is Outcome.DONE
    assert swapped and swapped[0] & os.O_NONBLOCK and swapped[0] & os.O_DIRECTORY
    assert not t.exists()


def test_what_cannot_be_removed_is_reported_stuck_with_its_path(tmp_path, parent, monkeypatch):
    t = tmp_path / "t"
    (t / "a" / "b").mkdir(parents=True)
    (t / "a" / "b" / "immutable").touch()
    (t / "a" / "other").touch()
    real_unlink = os.unlink

    def unlink(name, *, dir_fd=None):
        if name == "immutable":
            raise PermissionError(1, "Operation not permitted")
        return real_unlink(name, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    r = remove_entry(parent, "t", Budget(1000))
    assert r.outcome is Outcome.STUCK
    assert r.error == "a/b/immutable: Operation not permitted"
    assert not (t / "a" / "other").exists() and (t / "a" / "b" / "immutable").exists()


def test_a_wide_directory_is_streamed_not_listed(tmp_path, parent):
    t = tmp_path / "t"
    t.mkdir()
    fd = os.open(t, os.O_RDONLY | os.O_DIRECTORY)
    for i in range(5000):
        os.close(os.open(f"junk{i}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)
    budget = Budget(1000)
    assert remove_entry(parent, "t", budget).outcome is Outcome.DEFERRED
    assert 3900 <= len(os.listdir(t)) <= 4001  # about one unit per entry
    assert remove_entry(parent, "t", Budget(10**5)).outcome is Outcome.DONE


def test_a_vanished_entry_is_gone(tmp_path, parent):
    assert remove_entry(parent, "nothing", Budget(10)).outcome is Outcome.GONE
