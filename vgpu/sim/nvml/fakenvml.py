"""Locate the fake ``libnvidia-ml.so.1`` and drive its JSON configuration.

This is the one helper through which tests, benchmarks and the demo find the fake
NVML library (docs/testing.md §2, testing conventions).  The library itself is
C code in ``native/fakenvml/`` built by ``make fakenvml`` into
``build/fakenvml/libnvidia-ml.so.1``; ``VGPU_FAKE_NVML_LIBRARY`` overrides the path.
"""

from __future__ import annotations

import fcntl
import json
import os
import pathlib
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
DEFAULT_BUILD_PATH = REPO_ROOT / "build" / "fakenvml" / "libnvidia-ml.so.1"


def _sources_newer_than(target: pathlib.Path) -> bool:
    """Whether a C source of the fake is newer than the built library (or it is missing)."""
    try:
        built = target.stat().st_mtime_ns
    except FileNotFoundError:
        return True
    native = REPO_ROOT / "native"
    sources = [*native.glob("fakenvml/*.c"), *native.glob("fakenvml/*.h"), native / "nvml_abi.h"]
    return any(src.stat().st_mtime_ns > built for src in sources if src.exists())


def library_path(build: bool = True) -> pathlib.Path:
    """Path of the fake NVML library.

    With ``build`` (and a source checkout) it runs ``make fakenvml`` first when the
    library is missing or older than its sources, so a test run never loads a stale
    fake.  Concurrent callers (pytest workers, daemons) serialise on a lock file.
    """
    override = os.environ.get("VGPU_FAKE_NVML_LIBRARY")
    if override:
        return pathlib.Path(override)
    if build and (REPO_ROOT / "Makefile").exists() and _sources_newer_than(DEFAULT_BUILD_PATH):
        DEFAULT_BUILD_PATH.parent.mkdir(parents=True, exist_ok=True)
        with open(DEFAULT_BUILD_PATH.parent / ".build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if _sources_newer_than(DEFAULT_BUILD_PATH):
                subprocess.run(["make", "-s", "-C", str(REPO_ROOT), "fakenvml"], check=True)
    if not DEFAULT_BUILD_PATH.exists():
        raise FileNotFoundError(
            f"fake NVML library not found at {DEFAULT_BUILD_PATH}; run `make fakenvml` or set VGPU_FAKE_NVML_LIBRARY"
        )
    return DEFAULT_BUILD_PATH


def write_json_atomic(path: pathlib.Path, data: Any) -> None:
    """Replace ``path`` atomically (temp file + rename) so readers never see half a file."""
    path = pathlib.Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# Name substrings that select a built-in MIG profile table in the fake library
# (native/fakenvml/profiles.c PATTERNS; keep both in sync).
MIG_MODEL_PATTERNS: tuple[str, ...] = (
    "H200",
    "H20",
    "GB200",
    "B200",
    "H100 80GB HBM3",
    "H100-SXM5-80GB",
    "H100 SXM5 80GB",
    "H100-80GB",
    "A100-SXM4-80GB",
    "A100-80GB",
    "A100-PCIE-80GB",
    "A100 80GB",
    "A100-SXM4-40GB",
    "A100-40GB",
    "A100-PCIE-40GB",
    "A30",
)


def has_digit_after(name: str, pattern: str) -> bool:
    """Whether the first occurrence of ``pattern`` in ``name`` is followed by a digit."""
    at = name.find(pattern)
    return at >= 0 and name[at + len(pattern) : at + len(pattern) + 1].isdigit()


def has_mig_table(name: str) -> bool:
    """Whether the fake NVML has a MIG profile table for a GPU of this NVML name."""
    for pattern in MIG_MODEL_PATTERNS:
        at = name.find(pattern)
        if at < 0:
            continue
        end = at + len(pattern)
        if pattern in ("A30", "H20") and name[end : end + 1].isdigit():  # "A3000" is not an A30, "H200" no H20
            continue
        if pattern == "H20" and "141GB" in name:  # the 141 GB H20 has no table
            continue
        return True
    return False


def device(
    index: int = 0,
    *,
    name: str = "NVIDIA A100-SXM4-80GB",
    memory_total_mib: int = 81920,
    uuid: str | None = None,
    mig_capable: bool | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One device entry of the fake NVML config with realistic defaults.

    ``mig_capable`` defaults to whether the model has a built-in MIG table; the
    compute capability defaults to 10.0 for B200/GB200, 9.0 for Hopper names and 8.0 otherwise.
    """
    hopper = "H100" in name or "H200" in name or ("H20" in name and not has_digit_after(name, "H20"))
    blackwell = "B200" in name  # B200 and GB200: compute capability 10.0
    entry: dict[str, Any] = {
        "uuid": uuid or f"GPU-{index:08x}-6888-5063-1e4d-f2a09cfbf{index:03x}",
        "name": name,
        "memory_total_mib": memory_total_mib,
        "memory_used_mib": 0,
        "utilization_gpu": 0,
        "utilization_memory": 0,
        "minor": index,
        "pci_bus_id": f"00000000:{0x07 + index:02X}:00.0",
        "numa_node": 0,
        "compute_capability": [10, 0] if blackwell else [9, 0] if hopper else [8, 0],
        "mig_capable": has_mig_table(name) if mig_capable is None else mig_capable,
        "mig_mode": False,
        "processes": [],
        "xid_events": [],
    }
    entry.update(extra)
    return entry


@dataclass
class FakeNvml:
    """A fake-NVML configuration file plus the environment that selects it.

    ``env`` is what a child process (or this process, before NVML is loaded) needs:
    ``FAKE_NVML_CONFIG``, ``FAKE_NVML_STATE`` and ``VGPU_NVML_LIBRARY``.
    """

    config_path: pathlib.Path
    state_path: pathlib.Path
    library: pathlib.Path
    config: dict[str, Any]

    @classmethod
    def create(cls, directory: pathlib.Path, devices: list[dict[str, Any]], **top: Any) -> FakeNvml:
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        config = {"driver_version": "550.54.15", "cuda_driver_version": 12040, "devices": devices}
        config.update(top)
        fake = cls(
            config_path=directory / "fakenvml.json",
            state_path=directory / "fakenvml.json.state",
            library=library_path(),
            config=config,
        )
        fake.write()
        return fake

    @property
    def env(self) -> dict[str, str]:
        return {
            "FAKE_NVML_CONFIG": str(self.config_path),
            "FAKE_NVML_STATE": str(self.state_path),
            "VGPU_NVML_LIBRARY": str(self.library),
        }

    def write(self) -> None:
        """Write the current ``config`` atomically; a running process reloads it."""
        write_json_atomic(self.config_path, self.config)

    def update_device(self, index: int, **changes: Any) -> None:
        self.config["devices"][index].update(changes)
        self.write()

    def add_xid(self, index: int, xid: int | dict[str, int]) -> None:
        """Append one XID (an int, or {"xid", "gpu_instance_id", "compute_instance_id"})."""
        self.config["devices"][index].setdefault("xid_events", []).append(xid)
        self.write()

    def add_ecc_dbe(self, index: int, count: int = 1) -> None:
        """Raise ``count`` more double-bit ECC events on device ``index``."""
        dev = self.config["devices"][index]
        dev["ecc_dbe_events"] = dev.get("ecc_dbe_events", 0) + count
        self.write()

    def inject_error(self, function: str, code: int, index: int | None = None) -> None:
        """Make ``function`` (e.g. "nvmlEventSetWait") return NVML error ``code``.

        With ``index`` only for that device's handles, otherwise for every call.
        """
        target = self.config if index is None else self.config["devices"][index]
        target.setdefault("errors", {})[function] = code
        self.write()

    def clear_error(self, function: str, index: int | None = None) -> None:
        target = self.config if index is None else self.config["devices"][index]
        target.get("errors", {}).pop(function, None)
        self.write()

    def read_state(self) -> dict[str, Any]:
        """The MIG state file as written by the library ({} before any MIG change)."""
        try:
            return json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {}
