"""Which `libnvidia-ml.so.1` this process uses, and loading it into nvidia-ml-py.

The choice is made once per process (flag > ``VGPU_NVML_LIBRARY`` > the loader's search
path) and shared by both NVML users: nvidia-ml-py (discovery, health events) and the cffi
native layer (sampling, MIG).  Both must see the same library, or the fake NVML used in
tests and the demo would only be half in effect.

Code outside ``vgpu.nvml`` calls :func:`init_nvml`, whose failures are ``NvmlError``: the
nvidia-ml-py types stay inside this package.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from typing import Any

import pynvml

from vgpu.nvml.errors import INIT_HINT, NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_UNKNOWN, NvmlError, NvmlLibraryError

_log = logging.getLogger(__name__)

ENV_VAR = "VGPU_NVML_LIBRARY"
SYSTEM_LIBRARY = "libnvidia-ml.so.1"

_lock = threading.Lock()
_loaded_path: str | None = None


def resolve_library(flag_value: str | None = None) -> str:
    """The NVML library path or soname to load: flag > env var > system soname."""
    return flag_value or os.environ.get(ENV_VAR) or SYSTEM_LIBRARY


def init_pynvml(library: str | None = None) -> str:
    """Load ``library`` into nvidia-ml-py (once per process) and call ``nvmlInit``.

    Returns the path that was loaded.  Calling it again with another path is an error:
    pynvml keeps one library per process.  Each successful call must be paired with
    ``pynvml.nvmlShutdown()`` (NVML reference-counts init/shutdown).
    """
    global _loaded_path
    path = resolve_library(library)
    with _lock:
        if _loaded_path is None:
            try:
                pynvml.nvmlLib = ctypes.CDLL(path)
            except OSError as exc:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND) from exc
            # pynvml caches resolved symbols per process; start clean for the new library.
            pynvml._nvmlGetFunctionPointer_cache.clear()
            _loaded_path = path
        elif _loaded_path != path:
            raise RuntimeError(f"NVML library {_loaded_path} is already loaded; cannot switch to {path}")
    pynvml.nvmlInit()
    return path


def init_nvml(library: str | None = None) -> str:
    """:func:`init_pynvml` with its failures as ``NvmlError`` naming the library.

    ``NvmlLibraryError`` when the library cannot be loaded (or another one already is),
    ``NvmlError`` when ``nvmlInit`` fails; both messages carry the runtime hint.  Each
    successful call is one ``nvmlInit`` (paired with ``nvmlShutdown`` by whoever needs it).
    """
    path = resolve_library(library)
    try:
        return init_pynvml(library)
    except pynvml.NVMLError as exc:
        cause = exc.__cause__
        if exc.value == NVML_ERROR_LIBRARY_NOT_FOUND and cause is not None:
            raise NvmlLibraryError(
                exc.value, f"cannot load NVML library: {cause}; {INIT_HINT}", function="dlopen", library=path
            ) from exc
        raise NvmlError(exc.value, f"{exc}; {INIT_HINT}", function="nvmlInit", library=path) from exc
    except RuntimeError as exc:  # another library is already loaded into this process
        raise NvmlLibraryError(NVML_ERROR_UNKNOWN, str(exc), function="nvmlInit", library=path) from exc


def pynvml_text(value: Any) -> str:
    """A string nvidia-ml-py returned: ``bytes`` or ``str`` depending on its version."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def read_driver_version(library: str | None) -> str | None:
    """The NVIDIA driver version NVML reports, or None (logged) when NVML cannot tell.

    NVML counts initialisations, so this works whether or not the caller holds NVML open.
    """
    try:
        init_nvml(library)
    except Exception as exc:  # noqa: BLE001 - build info must never stop a daemon
        _log.info("driver version unknown: %s", exc)
        return None
    try:
        return pynvml_text(pynvml.nvmlSystemGetDriverVersion())
    except pynvml.NVMLError as exc:
        _log.info("driver version unknown: nvmlSystemGetDriverVersion: %s", exc)
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
