"""The DaemonSet's postStart hook, run for real with /bin/sh against a stand-in image and host.

The image layout comes from deploy/Dockerfile (where hooks/ and libvgpu.so are copied); the
host's $HOOK_PATH is a temp dir.  The hook must leave libvgpu.so and ld.so.preload (content per
docs/hami-core.md §1) in $HOOK_PATH, and running it again (a container restart) must succeed.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from vgpu.hamicore.paths import LD_SO_PRELOAD_CONTENT

from . import dockerfile as dockerfile_mod
from . import manifests as m


def _image_root(tmp_path):
    """Lay out the runtime stage's COPYs under tmp_path/image (libvgpu.so: a stand-in file)."""
    root = tmp_path / "image"
    for ins in dockerfile_mod.parse(m.DOCKERFILE.read_text()).final.of("COPY"):
        flags, (src,), dest = dockerfile_mod.copy_parts(ins)
        target = root / dest.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if "from" in flags:
            target.write_bytes(b"\x7fELF stand-in for HAMi-core's libvgpu.so\n")
        else:
            shutil.copy2(m.REPO / src, target)
    return root


def _run_hook(root, host_hook_path):
    ds = m.daemonset(m.single_file_docs())
    ctr = m.container(ds, "plugin")
    cmd = ctr["lifecycle"]["postStart"]["exec"]["command"]
    env = {k: v for k, v in m.plain_env(ctr).items()}
    assert env["HOOK_PATH"] == "/usr/local/vgpu"
    env["HOOK_PATH"] = str(host_hook_path)  # the hostPath, seen at the same path
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    argv = [cmd[0]] + [str(root / a.lstrip("/")) if a.startswith("/k8s-vgpu/") else a for a in cmd[1:]]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


def test_poststart_installs_hami_core_into_hook_path_idempotently(tmp_path):
    root = _image_root(tmp_path)
    host = tmp_path / "host" / "usr" / "local" / "vgpu"
    for attempt in range(2):
        r = _run_hook(root, host)
        assert r.returncode == 0, f"attempt {attempt}: {r.stderr}"
    lib = host / "libvgpu.so"
    assert lib.read_bytes() == (root / "k8s-vgpu/lib/nvidia/libvgpu.so").read_bytes()
    assert (host / "ld.so.preload").read_text().strip() == LD_SO_PRELOAD_CONTENT
    assert oct(lib.stat().st_mode & 0o777) == "0o755"
    assert oct((host / "containers").stat().st_mode & 0o7777) == "0o700"
    assert sorted(p.name for p in host.iterdir()) == ["containers", "ld.so.preload", "libvgpu.so"]


def test_poststart_fails_loudly_when_the_image_lacks_libvgpu(tmp_path):
    root = _image_root(tmp_path)
    (root / "k8s-vgpu/lib/nvidia/libvgpu.so").unlink()
    r = _run_hook(root, tmp_path / "host")
    assert r.returncode != 0
    assert "libvgpu.so" in r.stderr
