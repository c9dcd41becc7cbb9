"""The host directories get the modes docs/trust-model.md §3 and docs/hami-core.md §2.3 promise.

Three pieces of code create them — the postStart hook (hooks/install.sh), the plugin's Allocate
(``vgpu.hamicore.host.prepare_container``) and the monitor's discovery — so each is run for real
against a temporary host root, under a hostile umask, both on a fresh node and on a node upgraded
from the old modes (``containers/`` 0755, ``/tmp/vgpulock`` 0777 without the sticky bit):

- ``$HOOK_PATH/containers``: 0700, root's alone — no host user walks into another container's
  0777 directory (a container reaches its own through its bind mount, which never walks the
  parent);
- ``$HOOK_PATH/containers/<podUID>_<container>``: 0777 — the workload may run as any user;
- ``/tmp/vgpulock``: 1777 — shared, but nobody removes or replaces another user's entry; a lock
  directory that another user owns (planted in the world-writable ``/tmp``) is refused.
"""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess

import pytest

from vgpu.hamicore import paths
from vgpu.hamicore.contract import DeviceGrant
from vgpu.hamicore.host import ContainerPrepareError, prepare_container
from vgpu.monitor.discovery import Discovery

from . import manifests as m

POD = "6f1c7d2e-0d2b-4a53-9d51-2b3c4d5e6f70"
GPU = "GPU-00000000-1111-2222-3333-444444444444"
HOOK = m.REPO / "hooks" / "install.sh"


def _mode(path: str | pathlib.Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _layout(tmp_path: pathlib.Path) -> paths.HostLayout:
    (tmp_path / "tmp").mkdir(exist_ok=True)  # the host's /tmp
    return paths.HostLayout(hook_path=str(tmp_path / "usr/local/vgpu"), vgpulock_dir=str(tmp_path / "tmp/vgpulock"))


def _hami_core_files(lay: paths.HostLayout) -> None:
    os.makedirs(lay.hook_path, exist_ok=True)
    pathlib.Path(lay.libvgpu).write_bytes(b"\x7fELF stand-in")
    paths.ensure_ld_so_preload(lay)


def _allocate(lay: paths.HostLayout, container: str = "main") -> str:
    contract = prepare_container(
        lay,
        devices=[DeviceGrant(GPU, 1000, 30)],
        pod_uid=POD,
        container_name=container,
        cuda_disable_control=None,
        gpu_core_policy="default",
        lib_cuda_log_level=None,
        memory_factor=1,
    )
    return contract.host_cache_dir


def _run_hook(lay: paths.HostLayout, tmp_path: pathlib.Path) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "image"
    src.mkdir(exist_ok=True)
    (src / "libvgpu.so").write_bytes(b"\x7fELF stand-in")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOOK_PATH": lay.hook_path}
    return subprocess.run(["/bin/sh", str(HOOK), str(src)], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture(params=[0o000, 0o022, 0o077], ids=["umask000", "umask022", "umask077"])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_allocate_creates_the_promised_modes(tmp_path, umask):
    lay = _layout(tmp_path)
    _hami_core_files(lay)
    cache_dir = _allocate(lay)
    assert _mode(lay.containers_root) == paths.CONTAINERS_ROOT_MODE == 0o700
    assert _mode(cache_dir) == paths.CONTAINER_DIR_MODE == 0o777
    assert _mode(lay.vgpulock_dir) == paths.VGPULOCK_MODE == 0o1777
    assert os.lstat(lay.vgpulock_dir).st_mode & stat.S_ISVTX


def test_the_hook_and_the_monitor_create_the_same_root_mode(tmp_path, umask):
    lay = _layout(tmp_path)
    r = _run_hook(lay, tmp_path)
    assert r.returncode == 0, r.stderr
    assert _mode(lay.containers_root) == 0o700
    os.rmdir(lay.containers_root)
    assert Discovery(lay.containers_root).scan().ok  # the monitor may start first
    assert _mode(lay.containers_root) == 0o700


def test_an_upgraded_node_gets_the_new_modes(tmp_path, umask):
    lay = _layout(tmp_path)
    _hami_core_files(lay)
    os.makedirs(os.path.join(lay.containers_root, f"{POD}_old"))
    os.chmod(lay.containers_root, 0o755)
    os.makedirs(lay.vgpulock_dir)
    os.chmod(lay.vgpulock_dir, 0o777)
    _allocate(lay)
    assert _mode(lay.containers_root) == 0o700
    assert _mode(lay.vgpulock_dir) == 0o1777
    assert os.path.isdir(os.path.join(lay.containers_root, f"{POD}_old")), "nothing is ever removed"
    # The hook alone (a plugin restart before any Allocate) also closes containers/.
    os.chmod(lay.containers_root, 0o755)
    assert _run_hook(lay, tmp_path).returncode == 0
    assert _mode(lay.containers_root) == 0o700


@pytest.mark.parametrize("which", ["vgpulock", "containers", "container-dir"])
def test_a_directory_owned_by_another_user_is_refused(tmp_path, monkeypatch, which):
    """A host user can create /tmp/vgpulock before the plugin does (after a reboot cleared /tmp).

    As root the directory is really chowned to another uid; otherwise the owner the plugin sees
    through ``fstat`` is faked (the check compares ``st_uid`` with ``os.geteuid()``).
    """
    lay = _layout(tmp_path)
    _hami_core_files(lay)
    _allocate(lay)
    target = {
        "vgpulock": lay.vgpulock_dir,
        "containers": lay.containers_root,
        "container-dir": lay.container_dir(POD, "main"),
    }[which]
    stranger = os.geteuid() + 4242
    if os.geteuid() == 0:
        os.chown(target, stranger, stranger)
    else:
        real_fstat, target_st = os.fstat, os.lstat(target)

        def fstat(fd):
            st = real_fstat(fd)
            if os.path.samestat(st, target_st):
                values = list(st)
                values[stat.ST_UID] = stranger
                return os.stat_result(values)
            return st

        monkeypatch.setattr(os, "fstat", fstat)
    os.chmod(target, 0o755)
    with pytest.raises(ContainerPrepareError, match=f"{os.path.basename(target)} is owned by uid {stranger}, not by"):
        _allocate(lay)
    assert _mode(target) == 0o755, "a refused directory is not chmod'ed"


def test_the_docs_state_the_modes_the_code_creates():
    tree = (m.REPO / "docs" / "hami-core.md").read_text()
    assert "containers/                     created by the plugin, 0700" in tree
    assert "<podUID>_<containerName>/   created by the plugin at Allocate, chmod 0777" in tree
    assert "/tmp/vgpulock/                      created by the plugin, 1777" in tree
