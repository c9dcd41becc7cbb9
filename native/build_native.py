"""cffi (API mode) build script for the `vgpu._native` extension.

The native layer is a set of small components.  Each component `X` contributes:

* ``native/X.cdef`` – the declarations Python sees (cffi cdef syntax, no preprocessor);
* ``native/X.h``    – the C header the sources include;
* ``native/X.c``    – the implementation.

All components are compiled into one extension module so there is a single import
(``from vgpu._native import ffi, lib``).  NVML is never linked: the sampler resolves
its symbols at run time with dlopen/dlsym, so the module builds on machines without
a driver.  ``native/fakenvml/`` is a separate shared library built by the Makefile.
"""
from __future__ import annotations

import pathlib

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent


def _components() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.cdef"))


def _build() -> FFI:
    ffibuilder = FFI()
    names = _components()
    for name in names:
        ffibuilder.cdef((HERE / f"{name}.cdef").read_text())
    includes = "\n".join(f'#include "{name}.h"' for name in names)
    ffibuilder.set_source(
        "vgpu._native",
        includes,
        # setuptools wants paths relative to the project root (its working directory).
        sources=[f"native/{name}.c" for name in names],
        include_dirs=["native"],
        libraries=["dl"],
        extra_compile_args=["-O2", "-Wall", "-Wextra", "-std=gnu11"],
    )
    return ffibuilder


ffibuilder = _build()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
