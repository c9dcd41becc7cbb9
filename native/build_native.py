"""cffi (API mode) build script for the `vgpu._native` extension.

The native layer is a set of small components.  Each component `X` contributes:

* ``native/X.cdef`` – the declarations Python sees (cffi cdef syntax, no preprocessor);
* ``native/X.h``    – the C header the sources include;
* ``native/X.c``    – the implementation.

All components are compiled into one extension module so there is a single import
(``from vgpu._native import ffi, lib``).  They are cdef'd in the order of ``COMPONENTS``:
a type is declared exactly once, in the first component that needs it (``nvml_context``
declares ``vnv_ctx`` and the NVML handle types that ``nvml_sampler`` and ``nvml_mig`` use).

* ``nvml_context`` – dlopen/dlsym of ``libnvidia-ml.so.1``, init/shutdown, the device table:
  the one loaded NVML handle (its internals, shared by the NVML components, are in
  ``nvml_context_private.h``, which Python never sees);
* ``nvml_sampler`` – the bulk sample of every device into preallocated arrays;
* ``nvml_mig``     – the MIG calls;
* ``region``       – the HAMi-core shared-region reader.

NVML is never linked: the context resolves its symbols at run time with dlopen/dlsym, so
the module builds on machines without a driver.  ``native/nvml_abi.h`` is the NVML ABI
subset shared with ``native/fakenvml/``, a separate shared library built by the Makefile.
"""

from __future__ import annotations

import pathlib

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent


# cdef order: a component may use the types of the ones before it.
COMPONENTS = ("nvml_context", "nvml_sampler", "nvml_mig", "region")


def _components() -> list[str]:
    """``COMPONENTS``, after checking that it names exactly the ``native/*.cdef`` files."""
    found = {p.stem for p in HERE.glob("*.cdef")}
    if found != set(COMPONENTS):
        raise SystemExit(
            f"native/build_native.py: COMPONENTS {sorted(COMPONENTS)} != native/*.cdef "
            f"{sorted(found)}; list every component once, in cdef order"
        )
    return list(COMPONENTS)


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
