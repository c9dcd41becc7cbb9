"""Host and container paths of the HAMi-core integration (docs/hami-core.md §2, docs/decisions.md decision 5).

One :class:`HostLayout` (built from ``HOOK_PATH``) answers every "where is it" question for
the plugin, the monitor and the demo, so plugin and monitor can never disagree on the cache
root (upstream plugin#141).  The helpers that touch the host create what Allocate needs
without following symlinks: the per-container directory is written by the workload.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass

DEFAULT_HOOK_PATH = "/usr/local/vgpu"
VGPULOCK_DIR = "/tmp/vgpulock"

# Modes of the host directories (docs/hami-core.md §2.3, docs/trust-model.md).  ``containers/``
# is private to root: a workload reaches its own directory through its bind mount, which never
# walks the parent, so no host user or other container can reach another's region file.  Each
# container directory is world-writable (the workload may run as any user, HAMi#1090).  The lock
# directory is shared by every vGPU container, so it is sticky: nobody removes or replaces an
# entry another user owns.
CONTAINERS_ROOT_MODE = 0o700
CONTAINER_DIR_MODE = 0o777
VGPULOCK_MODE = 0o1777

# Paths inside the workload container.
CONTAINER_LIBVGPU = "/usr/local/vgpu/libvgpu.so"
CONTAINER_LD_SO_PRELOAD = "/etc/ld.so.preload"
CONTAINER_CACHE_DIR = "/tmp/vgpu"
CONTAINER_VGPULOCK = "/tmp/vgpulock"

# Content of $HOOK_PATH/ld.so.preload: the library's path INSIDE the container (docs/hami-core.md §1).
LD_SO_PRELOAD_CONTENT = CONTAINER_LIBVGPU

# Always used with ``fullmatch``: ``re.match(r"...$")`` also accepts a trailing newline, so
# ``<uid>_main\n`` would parse as container ``main`` (a second entry for the same container).
POD_UID_RE = re.compile(r"[0-9a-f-]{36}")
CONTAINER_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
CONTAINER_DIR_RE = re.compile(r"([0-9a-f-]{36})_([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)")


class HamiCoreFilesMissing(RuntimeError):
    """``libvgpu.so`` or ``ld.so.preload`` is not a regular file under ``$HOOK_PATH``."""


class HostPathError(RuntimeError):
    """A host directory the plugin manages is unusable (e.g. ``containers`` is a symlink)."""


def container_dir_name(pod_uid: str, container_name: str) -> str:
    """``<podUID>_<containerName>``; both parts validated, so the name splits back at the first ``_``."""
    if not POD_UID_RE.fullmatch(pod_uid):
        raise ValueError(f"pod UID {pod_uid!r} is not a 36-character lowercase UID")
    if not CONTAINER_NAME_RE.fullmatch(container_name):
        raise ValueError(f"container name {container_name!r} is not a DNS-1123 label")
    return f"{pod_uid}_{container_name}"


def parse_container_dir_name(name: str) -> tuple[str, str] | None:
    """``(podUID, containerName)`` of a cache directory name, or None if it is not one of ours."""
    m = CONTAINER_DIR_RE.fullmatch(name)
    return (m.group(1), m.group(2)) if m else None


def cache_file_name(cache_uuid: str) -> str:
    return f"{cache_uuid}.cache"


@dataclass(frozen=True)
class HostLayout:
    """Everything under ``$HOOK_PATH`` (hostPath mounted at the same path in both containers).

    ::

        $HOOK_PATH/libvgpu.so
        $HOOK_PATH/ld.so.preload
        $HOOK_PATH/containers/                                  0700, root's
        $HOOK_PATH/containers/<podUID>_<containerName>/         0777
        $HOOK_PATH/containers/<podUID>_<containerName>/<uuid4>.cache
        /tmp/vgpulock/                                          1777
    """

    hook_path: str = DEFAULT_HOOK_PATH
    vgpulock_dir: str = VGPULOCK_DIR

    @property
    def libvgpu(self) -> str:
        return os.path.join(self.hook_path, "libvgpu.so")

    @property
    def ld_so_preload(self) -> str:
        return os.path.join(self.hook_path, "ld.so.preload")

    @property
    def containers_root(self) -> str:
        return os.path.join(self.hook_path, "containers")

    def container_dir(self, pod_uid: str, container_name: str) -> str:
        """Host cache directory of one container: mounted at ``/tmp/vgpu`` inside it."""
        return os.path.join(self.containers_root, container_dir_name(pod_uid, container_name))

    def host_cache_file(self, pod_uid: str, container_name: str, cache_uuid: str) -> str:
        return os.path.join(self.container_dir(pod_uid, container_name), cache_file_name(cache_uuid))


def container_cache_file(cache_uuid: str) -> str:
    """``CUDA_DEVICE_MEMORY_SHARED_CACHE`` as the container sees it."""
    return f"{CONTAINER_CACHE_DIR}/{cache_file_name(cache_uuid)}"


def check_hami_core_files(layout: HostLayout) -> None:
    """Raise :class:`HamiCoreFilesMissing` unless both mounted host files are regular files."""
    missing = []
    for path in (layout.libvgpu, layout.ld_so_preload):
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                missing.append(f"{os.path.basename(path)} is not a regular file")
        except OSError as exc:
            missing.append(f"{os.path.basename(path)}: {exc.strerror}")
    if missing:
        raise HamiCoreFilesMissing(f"HAMi-core files missing under {layout.hook_path}: {'; '.join(missing)}")


def ensure_ld_so_preload(layout: HostLayout) -> bool:
    """(Re)write ``$HOOK_PATH/ld.so.preload`` atomically (temp + rename, 0644) if missing or different.

    Returns True when it wrote the file.
    """
    want = LD_SO_PRELOAD_CONTENT.encode()
    try:
        st = os.lstat(layout.ld_so_preload)
        if stat.S_ISREG(st.st_mode):
            with open(layout.ld_so_preload, "rb") as f:
                have = f.read(4096)
            if have.rstrip(b"\n") == want:  # a trailing newline is harmless (docs/hami-core.md §1)
                return False
    except FileNotFoundError:
        pass
    tmp = f"{layout.ld_so_preload}.tmp.{os.getpid()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, want)
            os.fchmod(fd, 0o644)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, layout.ld_so_preload)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return True


def _mkdir_mode(name: str, mode: int, *, dir_fd: int | None = None) -> int:
    """mkdir (if absent) + open without following a symlink + owner check + fchmod ``mode`` (umask-proof).

    A directory that already exists must belong to our own user: one that a host user planted
    (``/tmp`` is world-writable) or a workload chowned would otherwise stay under its control.
    Returns an ``O_DIRECTORY`` fd the caller closes.  Never removes anything (plugin#138).
    """
    try:
        os.mkdir(name, mode & 0o777, dir_fd=dir_fd)
    except FileExistsError:
        pass
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise HostPathError(f"{name} is a symbolic link or not a directory; refusing to use it") from None
        raise
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise HostPathError(
                f"{name} is owned by uid {st.st_uid}, not by the plugin's uid {os.geteuid()}; refusing to use it"
            )
        if stat.S_IMODE(st.st_mode) != mode:
            os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def prepare_container_dir(layout: HostLayout, pod_uid: str, container_name: str) -> str:
    """Create the container's cache directory (0777) and ``/tmp/vgpulock`` (1777) before Allocate answers.

    ``containers/`` itself is made 0700 (also when it exists with another mode).  None of the three
    may be a symlink or belong to another user.  Returns the directory.
    """
    name = container_dir_name(pod_uid, container_name)
    os.makedirs(layout.hook_path, exist_ok=True)
    root = _mkdir_mode(layout.containers_root, CONTAINERS_ROOT_MODE)
    try:
        os.close(_mkdir_mode(name, CONTAINER_DIR_MODE, dir_fd=root))  # workloads may run as any user (HAMi#1090)
    finally:
        os.close(root)
    os.close(_mkdir_mode(layout.vgpulock_dir, VGPULOCK_MODE))
    return os.path.join(layout.containers_root, name)
