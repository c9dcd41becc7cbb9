/* The physical floor of one NVML sample (benchmarks/test_nvml_floor.py): exactly the NVML calls
 * `Sampler.sample_into` makes per tick -- per device nvmlDeviceGetMemoryInfo,
 * nvmlDeviceGetUtilizationRates, nvmlDeviceGetComputeRunningProcesses_v3 and
 * nvmlDeviceGetProcessUtilization (since the newest sample seen), into buffers sized once --
 * and nothing else: no bounds checks, no output rows.  Read-only: it never changes any state of
 * the GPU (no MIG, no clocks, no persistence mode), so it may run against a real driver.
 *
 * Built into build/floors/libvgpu_floors.so by `make floors`; benchmarks/floors.py loads it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>

#include "nvml_abi.h"

#define MAX_DEV 64
#define MAX_PROC 256

typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*count_fn)(unsigned int *);
typedef nvmlReturn_t (*handle_fn)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*mem_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*util_fn)(nvmlDevice_t, nvmlUtilization_t *);
typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
typedef nvmlReturn_t (*putil_fn)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *,
                                 unsigned long long);

static struct {
    mem_fn mem;
    util_fn util;
    procs_fn procs;
    putil_fn putil;
    unsigned int n;
    nvmlDevice_t dev[MAX_DEV];
    unsigned long long last_seen[MAX_DEV];
    nvmlProcessInfo_t proc_buf[MAX_PROC];
    nvmlProcessUtilizationSample_t util_buf[MAX_PROC];
} F;

/* dlopen `library` (already loaded by the caller's NVML user: the same handle), init, handles.
 * Returns the device count, or -1. */
int nvml_floor_open(const char *library) {
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -1;
    init_fn init = (init_fn)dlsym(lib, "nvmlInit_v2");
    count_fn count = (count_fn)dlsym(lib, "nvmlDeviceGetCount_v2");
    handle_fn handle = (handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    F.mem = (mem_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo");
    F.util = (util_fn)dlsym(lib, "nvmlDeviceGetUtilizationRates");
    F.procs = (procs_fn)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    F.putil = (putil_fn)dlsym(lib, "nvmlDeviceGetProcessUtilization");
    if (!init || !count || !handle || !F.mem || !F.util || !F.procs || !F.putil) return -1;
    if (init() != NVML_SUCCESS || count(&F.n) != NVML_SUCCESS) return -1;
    if (F.n > MAX_DEV) F.n = MAX_DEV;
    for (unsigned int i = 0; i < F.n; i++)
        if (handle(i, &F.dev[i]) != NVML_SUCCESS) return -1;
    return (int)F.n;
}

/* One sample of every device; returns the number of running processes seen (a checksum). */
long nvml_floor_sample(void) {
    long seen = 0;
    for (unsigned int i = 0; i < F.n; i++) {
        nvmlMemory_t mem;
        nvmlUtilization_t util;
        F.mem(F.dev[i], &mem);
        F.util(F.dev[i], &util);
        unsigned int n = MAX_PROC;
        if (F.procs(F.dev[i], &n, F.proc_buf) == NVML_SUCCESS) seen += n;
        unsigned int m = MAX_PROC;
        if (F.putil(F.dev[i], F.util_buf, &m, F.last_seen[i]) == NVML_SUCCESS)
            for (unsigned int k = 0; k < m && k < MAX_PROC; k++)
                if (F.util_buf[k].timeStamp > F.last_seen[i]) F.last_seen[i] = F.util_buf[k].timeStamp;
    }
    return seen;
}
