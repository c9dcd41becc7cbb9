"""One exception type for every NVML failure, whichever binding raised it.

Discovery goes through nvidia-ml-py, sampling and MIG through the cffi layer; callers
should not care which.  ``NvmlError.code`` is the raw ``nvmlReturn_t`` so MIG code can
branch on e.g. ``NVML_ERROR_IN_USE`` without importing pynvml.
"""

from __future__ import annotations

# nvmlReturn_t values (NVML documentation; stable across driver versions).
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_VGPU_ECC_NOT_ENABLED = 22
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_FREQ_NOT_SUPPORTED = 24
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_DEPRECATED = 26
NVML_ERROR_NOT_READY = 27
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_INVALID_STATE = 29
NVML_ERROR_UNKNOWN = 999

_NAMES = {value: name for name, value in globals().items() if name.startswith("NVML_")}

# Hint that docs/health.md §6 asks for when NVML cannot start at all.
INIT_HINT = (
    "is the NVIDIA runtime configured for this container, and are the driver "
    "libraries and /dev/nvidia* device nodes present?"
)


def code_name(code: int) -> str:
    """``NVML_ERROR_IN_USE`` for 19; ``NVML_ERROR_<n>`` for codes this module does not know."""
    return _NAMES.get(code, f"NVML_ERROR_{code}")


class NvmlError(Exception):
    """An NVML call failed.

    ``code`` is the ``nvmlReturn_t``; ``message`` the library's ``nvmlErrorString`` text (or
    our own explanation for load failures); ``function`` the NVML entry point; ``library``
    the library path when known, so a wrong ``--nvml-library`` is obvious from the message.
    """

    def __init__(self, code: int, message: str, *, function: str = "", library: str = "") -> None:
        self.code = int(code)
        self.message = message
        self.function = function
        self.library = library
        where = f"{function}: " if function else ""
        lib = f" [NVML library {library}]" if library else ""
        super().__init__(f"{where}{message} ({code_name(self.code)}){lib}")


class NvmlLibraryError(NvmlError):
    """The NVML library could not be loaded, or lacks a required entry point."""
