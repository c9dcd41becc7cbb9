"""A CDI spec for the fake NVML's GPUs and MIG devices, as ``nvidia-ctk cdi generate`` writes one.

The toolkit enumerates the driver's NVML: every GPU by index, and on a GPU in MIG mode every
MIG device by ``nvmlDeviceGetMigDeviceHandleByIndex`` index, and names each under the chosen
strategies (docs/cdi.md §4): ``index`` → ``0`` and ``0:1``, ``uuid`` → ``GPU-…`` and ``MIG-…``,
plus ``all``.  :func:`write_spec` does the same against the fake library, in a child process
(a process keeps one NVML library loaded), and writes the spec file (YAML, as the toolkit's
default ``nvidia.yaml``).  Tests call it again after dynamic MIG made new devices, as an
operator re-runs the generator (docs/cdi.md §7).

Run as ``python -m vgpu.sim.nvml.cdi_spec OUT [--strategy uuid ...] [--kind nvidia.com/gpu]``
with the fake's environment.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from vgpu.sim.nvml.fakenvml import FakeNvml, write_json_atomic
from vgpu.sim.processes import subprocess_env

CDI_VERSION = "0.6.0"
DEFAULT_KIND = "nvidia.com/gpu"


def _enumerate() -> tuple[str, list[dict[str, Any]]]:
    """(driver version, [{index, uuid, minor, migs: [{index, uuid}]}]) from the loaded NVML."""
    import pynvml

    from vgpu.nvml.library import init_pynvml

    init_pynvml(None)  # VGPU_NVML_LIBRARY: the fake
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid = pynvml.nvmlDeviceGetUUID(h)
            gpu: dict[str, Any] = {
                "index": i,
                "uuid": uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                "minor": int(pynvml.nvmlDeviceGetMinorNumber(h)),
                "migs": [],
            }
            try:
                current, _pending = pynvml.nvmlDeviceGetMigMode(h)
            except pynvml.NVMLError:
                current = 0
            if current:
                for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(h)):
                    try:
                        m = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
                    except pynvml.NVMLError:
                        continue  # NOT_FOUND: no MIG device at this index
                    mu = pynvml.nvmlDeviceGetUUID(m)
                    gpu["migs"].append({"index": j, "uuid": mu.decode() if isinstance(mu, bytes) else str(mu)})
            gpus.append(gpu)
        return driver, gpus
    finally:
        pynvml.nvmlShutdown()


def build_spec(driver: str, gpus: Sequence[dict[str, Any]], strategies: Sequence[str], kind: str) -> dict[str, Any]:
    """The spec document: one entry per device and name, ``all``, and the driver-wide edits."""
    devices: list[dict[str, Any]] = []
    for g in gpus:
        node = {"path": f"/dev/nvidia{g['minor']}"}
        for s in strategies:
            devices.append(
                {"name": str(g["index"]) if s == "index" else g["uuid"], "containerEdits": {"deviceNodes": [node]}}
            )
        for m in g["migs"]:
            # The real entry adds the MIG's /dev/nvidia-caps nodes; the fake has no capability files.
            for s in strategies:
                name = f"{g['index']}:{m['index']}" if s == "index" else m["uuid"]
                devices.append({"name": name, "containerEdits": {"deviceNodes": [node]}})
    devices.append(
        {"name": "all", "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{g['minor']}"} for g in gpus]}}
    )
    lib = "/usr/lib/x86_64-linux-gnu"
    return {
        "cdiVersion": CDI_VERSION,
        "kind": kind,
        "devices": devices,
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [
                {"path": p}
                for p in ("/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidiactl")
            ],
            "mounts": [
                {
                    "hostPath": f"{lib}/{name}.{driver}",
                    "containerPath": f"{lib}/{name}.{driver}",
                    "options": ["ro", "nosuid", "nodev", "bind"],
                }
                for name in ("libcuda.so", "libnvidia-ml.so")
            ],
            "hooks": [
                {
                    "hookName": "createContainer",
                    "path": "/usr/bin/nvidia-cdi-hook",
                    "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", lib],
                }
            ],
        },
    }


def write_spec(
    fake: FakeNvml,
    directory: pathlib.Path,
    *,
    strategies: Sequence[str] = ("uuid",),
    kind: str = DEFAULT_KIND,
    filename: str = "nvidia.yaml",
    timeout: float = 60.0,
) -> pathlib.Path:
    """Generate the spec for ``fake`` into ``directory/filename`` (replaced atomically)."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / filename
    args = [sys.executable, "-m", "vgpu.sim.nvml.cdi_spec", str(out), "--kind", kind]
    for s in strategies:
        args += ["--strategy", s]
    done = subprocess.run(args, env=subprocess_env(fake.env), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"CDI spec generation failed ({done.returncode}): {done.stderr[-2000:]}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vgpu.sim.nvml.cdi_spec")
    p.add_argument("out")
    p.add_argument("--strategy", action="append", choices=("uuid", "index"))
    p.add_argument("--kind", default=DEFAULT_KIND)
    a = p.parse_args(argv)
    driver, gpus = _enumerate()
    spec = build_spec(driver, gpus, a.strategy or ["uuid"], a.kind)
    out = pathlib.Path(a.out)
    if out.suffix == ".json":
        write_json_atomic(out, spec)
    else:
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(yaml.safe_dump(spec, sort_keys=False))
        tmp.replace(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
