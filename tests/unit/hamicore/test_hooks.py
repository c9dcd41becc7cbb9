"""hooks/: the ld.so.preload content and the install script, run for real with /bin/sh."""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import subprocess
import threading

import pytest

from vgpu.hamicore.paths import LD_SO_PRELOAD_CONTENT

HOOKS = pathlib.Path(__file__).resolve().parents[3] / "hooks"
SCRIPT = HOOKS / "install.sh"


def install(*args: str, env: dict[str, str] | None = None, script: pathlib.Path = SCRIPT):
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    full_env.update(env or {})
    return subprocess.run(["sh", str(script), *args], capture_output=True, text=True, env=full_env, timeout=60)


@pytest.fixture
def src(tmp_path) -> pathlib.Path:
    d = tmp_path / "src"
    d.mkdir()
    (d / "libvgpu.so").write_bytes(b"\x7fELF-version-1" * 100)
    return d


def test_preload_file_content_is_exactly_the_library_path():
    assert (HOOKS / "ld.so.preload").read_bytes() == b"/usr/local/vgpu/libvgpu.so"
    assert LD_SO_PRELOAD_CONTENT == "/usr/local/vgpu/libvgpu.so"


def test_fresh_install(tmp_path, src):
    dest = tmp_path / "host" / "usr" / "local" / "vgpu"
    r = install(str(src), str(dest))
    assert r.returncode == 0, r.stderr
    assert (dest / "libvgpu.so").read_bytes() == (src / "libvgpu.so").read_bytes()
    assert (dest / "ld.so.preload").read_bytes() == b"/usr/local/vgpu/libvgpu.so"
    assert stat.S_IMODE((dest / "libvgpu.so").stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "ld.so.preload").stat().st_mode) == 0o644
    assert stat.S_IMODE((dest / "containers").stat().st_mode) == 0o700  # root's alone (docs/hami-core.md §2.3)
    assert sorted(p.name for p in dest.iterdir()) == ["containers", "ld.so.preload", "libvgpu.so"]  # no temp files


def test_second_run_is_a_no_op(tmp_path, src):
    dest = tmp_path / "hook"
    assert install(str(src), str(dest)).returncode == 0
    inodes = {p.name: p.stat().st_ino for p in dest.iterdir()}
    r = install(str(src), str(dest))
    assert r.returncode == 0 and r.stdout.count("up to date") == 2
    assert {p.name: p.stat().st_ino for p in dest.iterdir()} == inodes


def test_update_replaces_by_rename(tmp_path, src):
    dest = tmp_path / "hook"
    assert install(str(src), str(dest)).returncode == 0
    old_inode = (dest / "libvgpu.so").stat().st_ino
    (src / "libvgpu.so").write_bytes(b"\x7fELF-version-2")
    assert install(str(src), str(dest)).returncode == 0
    assert (dest / "libvgpu.so").read_bytes() == b"\x7fELF-version-2"
    assert (dest / "libvgpu.so").stat().st_ino != old_inode
    assert sorted(p.name for p in dest.iterdir()) == ["containers", "ld.so.preload", "libvgpu.so"]


def test_preload_from_the_source_directory_wins(tmp_path, src):
    (src / "ld.so.preload").write_bytes(b"/usr/local/vgpu/libvgpu.so\n")  # upstream image layout
    dest = tmp_path / "hook"
    assert install(str(src), str(dest)).returncode == 0
    assert (dest / "ld.so.preload").read_bytes() == b"/usr/local/vgpu/libvgpu.so\n"


def test_without_a_preload_file_anywhere_the_content_is_written(tmp_path, src):
    lone = tmp_path / "bin"
    lone.mkdir()
    shutil.copy(SCRIPT, lone / "install.sh")
    dest = tmp_path / "hook"
    assert install(str(src), str(dest), script=lone / "install.sh").returncode == 0
    assert (dest / "ld.so.preload").read_bytes() == b"/usr/local/vgpu/libvgpu.so"


def test_defaults_come_from_the_environment(tmp_path, src):
    dest = tmp_path / "from-env"
    r = install(env={"VGPU_HOOK_SOURCE": str(src), "HOOK_PATH": str(dest)})
    assert r.returncode == 0, r.stderr
    assert (dest / "libvgpu.so").exists()


def test_missing_library_is_a_clear_error_and_changes_nothing(tmp_path, src):
    dest = tmp_path / "hook"
    assert install(str(src), str(dest)).returncode == 0
    before = (dest / "libvgpu.so").read_bytes()
    (src / "libvgpu.so").unlink()
    r = install(str(src), str(dest))
    assert r.returncode == 1
    assert f"{src}/libvgpu.so is missing" in r.stderr
    assert (dest / "libvgpu.so").read_bytes() == before


def test_missing_source_directory(tmp_path):
    r = install(str(tmp_path / "nope"), str(tmp_path / "hook"))
    assert r.returncode == 1 and "source directory" in r.stderr and str(tmp_path / "nope") in r.stderr
    assert not (tmp_path / "hook").exists()


def test_library_that_is_a_directory_is_refused(tmp_path, src):
    (src / "libvgpu.so").unlink()
    (src / "libvgpu.so").mkdir()
    r = install(str(src), str(tmp_path / "hook"))
    assert r.returncode == 1 and "not a regular file" in r.stderr


def test_target_that_is_a_directory_is_refused(tmp_path, src):
    dest = tmp_path / "hook"
    (dest / "libvgpu.so").mkdir(parents=True)
    r = install(str(src), str(dest))
    assert r.returncode == 1 and "is a directory" in r.stderr
    assert sorted(p.name for p in dest.iterdir()) == ["containers", "libvgpu.so"]


def test_target_symlink_to_a_directory_is_refused(tmp_path, src):
    dest = tmp_path / "hook"
    dest.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (dest / "libvgpu.so").symlink_to(tmp_path / "elsewhere")
    r = install(str(src), str(dest))
    assert r.returncode == 1 and "is a directory" in r.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_target_symlink_to_a_file_is_replaced_not_written_through(tmp_path, src):
    dest = tmp_path / "hook"
    dest.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (dest / "libvgpu.so").symlink_to(victim)
    assert install(str(src), str(dest)).returncode == 0
    assert victim.read_bytes() == b"keep"
    assert not (dest / "libvgpu.so").is_symlink()
    assert (dest / "libvgpu.so").read_bytes() == (src / "libvgpu.so").read_bytes()


def test_readers_never_see_a_partial_library(tmp_path, src):
    """Reinstall alternating 4 MiB versions while a reader keeps reading the target."""
    a, b = b"a" * (4 << 20), b"b" * (4 << 20)
    dest = tmp_path / "hook"
    (src / "libvgpu.so").write_bytes(a)
    assert install(str(src), str(dest)).returncode == 0
    bad: list[str] = []
    reads = 0
    stop = threading.Event()

    def reader():
        nonlocal reads
        while not stop.is_set():
            data = (dest / "libvgpu.so").read_bytes()
            reads += 1
            if data not in (a, b):
                bad.append(f"{len(data)} bytes, mixed content")

    t = threading.Thread(target=reader)
    t.start()
    try:
        for k in range(8):
            (src / "libvgpu.so").write_bytes(b if k % 2 == 0 else a)
            assert install(str(src), str(dest)).returncode == 0
    finally:
        stop.set()
        t.join()
    assert not bad and reads > 0


def test_containers_dir_is_made_private_also_when_it_exists(tmp_path, src):
    # An upgraded node has containers/ at 0755 (the old mode): any host user could walk into
    # every container's 0777 directory.  The hook makes it 0700 and keeps what is inside.
    dest = tmp_path / "hook"
    (dest / "containers" / "kept").mkdir(parents=True)
    (dest / "containers").chmod(0o755)
    old = os.umask(0)
    try:
        r = install(str(src), str(dest))
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE((dest / "containers").stat().st_mode) == 0o700
    assert (dest / "containers" / "kept").is_dir()


def test_containers_symlink_is_refused(tmp_path, src):
    dest = tmp_path / "hook"
    dest.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere").chmod(0o755)
    (dest / "containers").symlink_to(tmp_path / "elsewhere")
    r = install(str(src), str(dest))
    assert r.returncode == 1 and f"{dest}/containers is a symbolic link" in r.stderr
    assert stat.S_IMODE((tmp_path / "elsewhere").stat().st_mode) == 0o755
