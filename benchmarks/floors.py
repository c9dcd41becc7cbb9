"""The C floor programs of benchmarks/floors/, loaded in this process (``make floors`` builds them).

Each floor makes exactly the system calls (or library calls) of one hot path and nothing else,
so ``floor / ours`` says how much of our time is our own overhead.  They are called through
ctypes, once per batch, and timed call by call in turn with ours (``interleaved_medians``).
"""

from __future__ import annotations

import ctypes
import pathlib

FLOORS_LIB = pathlib.Path(__file__).resolve().parent.parent / "build" / "floors" / "libvgpu_floors.so"


def load() -> ctypes.CDLL:
    """The floors library; fails naming the make target when it was not built."""
    if not FLOORS_LIB.exists():
        raise FileNotFoundError(f"{FLOORS_LIB} is missing: run `make floors` (make bench and bench-quick do)")
    lib = ctypes.CDLL(str(FLOORS_LIB))
    lib.region_floor_read.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
    lib.region_floor_read.restype = ctypes.c_int
    lib.nvml_floor_open.argtypes = [ctypes.c_char_p]
    lib.nvml_floor_open.restype = ctypes.c_int
    lib.nvml_floor_sample.argtypes = []
    lib.nvml_floor_sample.restype = ctypes.c_long
    return lib
