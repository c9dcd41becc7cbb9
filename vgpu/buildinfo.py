"""The ``vgpu_build_info`` gauge's labels, built once for both daemons (docs/metrics.md §10.2).

Both `vgpu plugin` and `vgpu monitor` export ``vgpu_build_info{daemon,version,hamicore_commit,
python,driver_version} 1``, so a dashboard can tell which build and which HAMi-core runs on
which driver.  The daemons never import each other; each renders these labels with its own
exposition code, the label names and values come only from here.

Where the values come from:

- ``version``: the ``vgpu`` package version;
- ``hamicore_commit``: the environment variable :data:`HAMICORE_COMMIT_ENV`, which the image
  sets from the HAMi-core commit it was built with (``unknown`` when it is not set);
- ``python``: the interpreter's ``major.minor.micro``;
- ``driver_version``: NVML's ``nvmlSystemGetDriverVersion`` read once at startup
  (``unknown`` when NVML did not start).
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Mapping

import pynvml

import vgpu
from vgpu.nvml.library import init_nvml, pynvml_text

log = logging.getLogger(__name__)

NAME = "vgpu_build_info"
HELP = "Always 1; the labels name this daemon's build, its HAMi-core commit, Python and the NVIDIA driver"
LABELS = ("daemon", "version", "hamicore_commit", "python", "driver_version")
HAMICORE_COMMIT_ENV = "VGPU_HAMICORE_COMMIT"
UNKNOWN = "unknown"


def build_labels(daemon: str, driver_version: str | None, environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """(name, value) pairs in :data:`LABELS` order; empty or missing values read ``unknown``."""
    commit = (environ.get(HAMICORE_COMMIT_ENV) or "").strip() or UNKNOWN
    values = (daemon, vgpu.__version__, commit, platform.python_version(), driver_version or UNKNOWN)
    return tuple(zip(LABELS, values, strict=True))


def read_driver_version(library: str | None) -> str | None:
    """The NVIDIA driver version NVML reports, or None (logged) when NVML cannot tell.

    NVML counts initialisations, so this works whether or not the caller holds NVML open.
    """
    try:
        init_nvml(library)
    except Exception as exc:  # noqa: BLE001 - build info must never stop a daemon
        log.info("driver version unknown: %s", exc)
        return None
    try:
        return pynvml_text(pynvml.nvmlSystemGetDriverVersion())
    except pynvml.NVMLError as exc:
        log.info("driver version unknown: nvmlSystemGetDriverVersion: %s", exc)
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
