"""Host directory layout and what Allocate prepares on the host (docs/hami-core.md §1, §2.3)."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from vgpu.hamicore.paths import (
    LD_SO_PRELOAD_CONTENT,
    HamiCoreFilesMissing,
    HostLayout,
    HostPathError,
    check_hami_core_files,
    container_dir_name,
    ensure_ld_so_preload,
    parse_container_dir_name,
    prepare_container_dir,
)

POD = "7f3c1a52-9d2e-4b7a-8c1e-0a1b2c3d4e5f"


@pytest.fixture
def layout(tmp_path) -> HostLayout:
    return HostLayout(hook_path=str(tmp_path / "hook"), vgpulock_dir=str(tmp_path / "vgpulock"))


def test_layout_paths():
    lay = HostLayout()
    assert lay.libvgpu == "/usr/local/vgpu/libvgpu.so"
    assert lay.ld_so_preload == "/usr/local/vgpu/ld.so.preload"
    assert lay.containers_root == "/usr/local/vgpu/containers"
    assert lay.container_dir(POD, "c-1") == f"/usr/local/vgpu/containers/{POD}_c-1"
    assert lay.host_cache_file(POD, "c", "u") == f"/usr/local/vgpu/containers/{POD}_c/u.cache"


@pytest.mark.parametrize(
    "name,parsed",
    [
        (f"{POD}_main", (POD, "main")),
        (f"{POD}_a-b-9", (POD, "a-b-9")),
        (f"{POD}_", None),
        (f"{POD}_-x", None),
        (f"{POD}_UPPER", None),
        ("short_main", None),
        (f"{POD}_main_x", None),
        (f"{POD}_{'a' * 64}", None),
        (f"{POD}_{'a' * 63}", (POD, "a" * 63)),
        # `$` also matches before a trailing newline: a name ending in "\n" is not ours
        (f"{POD}_main\n", None),
        (f"{POD[:-1]}\n_main", None),
        (f"{POD}_main\n\n", None),
    ],
)
def test_parse_container_dir_name(name, parsed):
    assert parse_container_dir_name(name) == parsed


def test_container_dir_name_validates():
    with pytest.raises(ValueError):
        container_dir_name("../../etc", "c")
    with pytest.raises(ValueError):
        container_dir_name(POD, "../x")


@pytest.mark.parametrize("uid,ctr", [(POD + "\n", "main"), (POD, "main\n")])
def test_container_dir_name_rejects_a_trailing_newline(uid, ctr):
    with pytest.raises(ValueError):
        container_dir_name(uid, ctr)


def test_prepare_creates_the_modes_regardless_of_umask(layout):
    # H-5 (HAMi#1090): non-root workloads must be able to create their cache file (0777), the lock
    # directory is shared but sticky (1777), and containers/ is root's alone (0700).
    old = os.umask(0o077)
    try:
        path = prepare_container_dir(layout, POD, "main")
        again = prepare_container_dir(layout, POD, "main")  # idempotent, never removes anything
    finally:
        os.umask(old)
    assert path == again == layout.container_dir(POD, "main")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o777
    assert stat.S_IMODE(os.stat(layout.vgpulock_dir).st_mode) == 0o1777
    assert stat.S_IMODE(os.stat(layout.containers_root).st_mode) == 0o700


def test_prepare_keeps_existing_files(layout):
    path = prepare_container_dir(layout, POD, "main")
    with open(os.path.join(path, "old.cache"), "w") as f:
        f.write("x")
    os.chmod(path, 0o700)  # a container may change its mode bits
    prepare_container_dir(layout, POD, "main")
    assert os.path.exists(os.path.join(path, "old.cache"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o777


def test_prepare_refuses_symlinked_directories(layout, tmp_path):
    os.makedirs(layout.hook_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, layout.containers_root)
    with pytest.raises(HostPathError):
        prepare_container_dir(layout, POD, "main")
    os.unlink(layout.containers_root)
    os.mkdir(layout.containers_root)
    os.symlink(elsewhere, layout.container_dir(POD, "main"))
    with pytest.raises(HostPathError):
        prepare_container_dir(layout, POD, "main")
    assert list(elsewhere.iterdir()) == []


def test_check_hami_core_files(layout):
    os.makedirs(layout.hook_path)
    with pytest.raises(HamiCoreFilesMissing) as info:
        check_hami_core_files(layout)
    assert str(info.value).startswith(f"HAMi-core files missing under {layout.hook_path}")
    with open(layout.libvgpu, "wb") as f:
        f.write(b"\x7fELF")
    ensure_ld_so_preload(layout)
    check_hami_core_files(layout)
    os.unlink(layout.libvgpu)
    os.mkdir(layout.libvgpu)
    with pytest.raises(HamiCoreFilesMissing) as info:
        check_hami_core_files(layout)
    assert "libvgpu.so is not a regular file" in str(info.value)


def test_ensure_ld_so_preload_writes_atomically_once(layout):
    os.makedirs(layout.hook_path)
    assert ensure_ld_so_preload(layout) is True
    with open(layout.ld_so_preload) as f:
        assert f.read() == LD_SO_PRELOAD_CONTENT == "/usr/local/vgpu/libvgpu.so"
    assert stat.S_IMODE(os.stat(layout.ld_so_preload).st_mode) == 0o644
    assert ensure_ld_so_preload(layout) is False
    with open(layout.ld_so_preload, "w") as f:
        f.write(LD_SO_PRELOAD_CONTENT + "\n")  # upstream-style trailing newline is fine
    assert ensure_ld_so_preload(layout) is False
    with open(layout.ld_so_preload, "w") as f:
        f.write("/somewhere/else.so")
    inode = os.stat(layout.ld_so_preload).st_ino
    assert ensure_ld_so_preload(layout) is True
    assert os.stat(layout.ld_so_preload).st_ino != inode  # replaced by rename, not rewritten in place
    assert sorted(os.listdir(layout.hook_path)) == ["ld.so.preload"]


def test_ensure_ld_so_preload_replaces_a_symlink_without_writing_through_it(layout, tmp_path):
    os.makedirs(layout.hook_path)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, layout.ld_so_preload)
    assert ensure_ld_so_preload(layout) is True
    assert victim.read_text() == "keep"
    assert not os.path.islink(layout.ld_so_preload)


def test_concurrent_readers_see_old_or_new_preload_only(layout):
    os.makedirs(layout.hook_path)
    old = "/old/lib.so"
    bad = os.path.join(layout.hook_path, "bad")
    seen: set[str] = set()
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                with open(layout.ld_so_preload) as f:
                    seen.add(f.read())
            except FileNotFoundError:
                seen.add("<missing>")

    with open(layout.ld_so_preload, "w") as f:
        f.write(old)
    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(300):
            with open(bad, "w") as f:
                f.write(old)
            os.replace(bad, layout.ld_so_preload)  # an outdated file appears (atomically) ...
            assert ensure_ld_so_preload(layout)  # ... and we restore it
    finally:
        stop.set()
        t.join()
    assert seen <= {old, LD_SO_PRELOAD_CONTENT}, seen  # never empty, partial or missing
    assert LD_SO_PRELOAD_CONTENT in seen
