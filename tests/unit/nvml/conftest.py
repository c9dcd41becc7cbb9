"""A deliberately incomplete NVML library, compiled per test, for the loader's error paths.

It is not a stand-in for NVML behaviour (the fake NVML is): it exists to check what the
native layer does when a library lacks entry points or answers errors, which the
complete fake cannot show.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
from collections.abc import Callable

import pytest

PARTIAL_NVML_C = r"""
typedef struct nvmlDevice_st *nvmlDevice_t;
static int devices[2];
int nvmlInit_v2(void) {
#ifdef INIT_FAILS
    return 9; /* NVML_ERROR_DRIVER_NOT_LOADED */
#else
    return 0;
#endif
}
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int rc) {
    switch (rc) {
    case 3: return "Not Supported";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
    }
}
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    if (i == 1) return 15; /* NVML_ERROR_GPU_IS_LOST */
    *d = (nvmlDevice_t)&devices[i];
    return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_t d, unsigned long long *m) {
    (void)d;
    m[0] = 100ull << 20; m[1] = 60ull << 20; m[2] = 40ull << 20; /* total, free, used */
    return 0;
}
#ifndef OMIT_UTILIZATION
int nvmlDeviceGetUtilizationRates(nvmlDevice_t d, unsigned int *u) { (void)d; (void)u; return 3; }
#endif
"""


@pytest.fixture
def partial_nvml(tmp_path: pathlib.Path) -> Callable[..., pathlib.Path]:
    """Build the partial library with the given -D macros; returns its path."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:  # the project needs a C compiler anyway (README Quick start)
        pytest.fail("no C compiler found (cc/gcc) — required to build the project")
    src = tmp_path / "partial_nvml.c"
    src.write_text(PARTIAL_NVML_C)

    def build(*defines: str) -> pathlib.Path:
        out = tmp_path / f"libpartial{'_'.join(d.lower() for d in defines)}.so"
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src), *(f"-D{d}" for d in defines)], check=True)
        return out

    return build
