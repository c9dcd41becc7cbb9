"""Owner of one native NVML context (``vnv_ctx`` of native/nvml_context.c).

The C layer dlopen()s the library chosen by ``--nvml-library`` / ``VGPU_NVML_LIBRARY``
(the same choice nvidia-ml-py gets, see ``vgpu.nvml.library``), resolves its symbols at
run time and initialises NVML.  ``vgpu.nvml.sampler`` (the per-tick sample) and
``vgpu.nvml.mig_calls`` (the MIG calls) build on this class; each instance is one
``nvmlInit`` ... ``nvmlShutdown`` pair.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from vgpu._native import ffi, lib
from vgpu.nvml.errors import (
    INIT_HINT,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_UNINITIALIZED,
    NVML_SUCCESS,
    NvmlError,
    NvmlLibraryError,
)
from vgpu.nvml.library import resolve_library

log = logging.getLogger(__name__)

_ERR_LEN = 1024


class NvmlContext:
    """NVML loaded by path and initialised, with its device handles enumerated.

    ``lock`` serialises every use of the context: the C state (device table, sampler
    scratch buffers) is not thread-safe.  ``close()`` is idempotent; the object is also a
    context manager.
    """

    def __init__(self, library: str | None = None) -> None:
        self.library = resolve_library(library)
        self.lock = threading.Lock()
        out = ffi.new("vnv_ctx **")
        err = ffi.new("char[]", _ERR_LEN)
        rc = lib.vnv_open(self.library.encode(), out, err, _ERR_LEN)
        if rc != NVML_SUCCESS:
            message = ffi.string(err).decode("utf-8", "replace")
            if rc in (NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND):
                raise NvmlLibraryError(rc, f"{message}; {INIT_HINT}", function="dlopen", library=self.library)
            raise NvmlError(rc, f"{message}; {INIT_HINT}", function="nvmlInit", library=self.library)
        self._ctx: Any = out[0]
        buf = ffi.new("char[]", _ERR_LEN)
        n = lib.vnv_missing_symbols(self._ctx, buf, _ERR_LEN)
        text = ffi.string(buf).decode()
        self.missing_symbols: tuple[str, ...] = tuple(s for s in text.split(",") if s)
        if n:
            log.warning(
                "NVML library %s lacks %d optional entry points (those features answer FUNCTION_NOT_FOUND): %s",
                self.library,
                n,
                text,
            )

    # -- context -------------------------------------------------------------------------

    @property
    def ctx(self) -> Any:
        """The ``vnv_ctx *``; raises once closed."""
        if self._ctx is None:
            raise NvmlError(NVML_ERROR_UNINITIALIZED, "native NVML context is closed", library=self.library)
        return self._ctx

    @property
    def closed(self) -> bool:
        return self._ctx is None

    def close(self) -> None:
        """``nvmlShutdown`` and ``dlclose``; handles obtained from this context become invalid."""
        with self.lock:
            ctx, self._ctx = self._ctx, None
            if ctx is not None:
                lib.vnv_close(ctx)

    def __enter__(self) -> NvmlContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # last resort; callers close explicitly
        if getattr(self, "_ctx", None) is not None:
            lib.vnv_close(self._ctx)
            self._ctx = None

    # -- helpers -------------------------------------------------------------------------

    def device_count(self) -> int:
        with self.lock:
            return int(lib.vnv_device_count(self.ctx))

    def refresh(self) -> int:
        """Re-enumerate devices (after a MIG mode change handles may change); returns the count."""
        err = ffi.new("char[]", _ERR_LEN)
        with self.lock:
            rc = lib.vnv_refresh(self.ctx, err, _ERR_LEN)
            if rc != NVML_SUCCESS:
                raise NvmlError(
                    rc, ffi.string(err).decode("utf-8", "replace"), function="nvmlDeviceGetCount", library=self.library
                )
            return int(lib.vnv_device_count(self.ctx))

    def error_string(self, code: int) -> str:
        """``nvmlErrorString`` of the loaded library."""
        if self._ctx is None:
            return f"NVML error {code}"
        return ffi.string(lib.vnv_error_string(self._ctx, code)).decode("utf-8", "replace")

    def error(self, code: int, function: str) -> NvmlError:
        return NvmlError(code, self.error_string(code), function=function, library=self.library)

    def check(self, code: int, function: str) -> None:
        """Raise ``NvmlError`` for a non-success return code."""
        if code != NVML_SUCCESS:
            raise self.error(code, function)
