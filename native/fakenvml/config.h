/*
 * config.h - the FAKE_NVML_CONFIG file (schema: native/fakenvml/README.md,
 * docs/testing.md §3.1).  Parsing is strict: an unknown key, a wrong type or
 * an out-of-range value is an error naming the JSON path.
 */
#ifndef FAKENVML_CONFIG_H
#define FAKENVML_CONFIG_H

#pragma GCC visibility push(hidden)

#include <stddef.h>

#include "nvml_abi.h"
#include "profiles.h"

#define FAKE_MAX_DEVICES 64
#define FAKE_MAX_PROCESSES 4096    /* per device */
#define FAKE_MAX_XIDS 1000000      /* per device */
#define FAKE_NO_INSTANCE 0xFFFFFFFFu

/* Functions whose return code a config can override ("errors" maps). */
#define FAKE_FUNCTIONS(X)                                    \
    X(nvmlInit)                                              \
    X(nvmlSystemGetDriverVersion)                            \
    X(nvmlSystemGetNVMLVersion)                              \
    X(nvmlSystemGetCudaDriverVersion)                        \
    X(nvmlDeviceGetCount)                                    \
    X(nvmlDeviceGetHandleByIndex)                            \
    X(nvmlDeviceGetHandleByUUID)                             \
    X(nvmlDeviceGetHandleByPciBusId)                         \
    X(nvmlDeviceGetIndex)                                    \
    X(nvmlDeviceGetUUID)                                     \
    X(nvmlDeviceGetName)                                     \
    X(nvmlDeviceGetMinorNumber)                              \
    X(nvmlDeviceGetPciInfo)                                  \
    X(nvmlDeviceGetCudaComputeCapability)                    \
    X(nvmlDeviceGetNumaNodeId)                               \
    X(nvmlDeviceGetMemoryInfo)                               \
    X(nvmlDeviceGetUtilizationRates)                         \
    X(nvmlDeviceGetComputeRunningProcesses)                  \
    X(nvmlDeviceGetGraphicsRunningProcesses)                 \
    X(nvmlDeviceGetProcessUtilization)                       \
    X(nvmlEventSetCreate)                                    \
    X(nvmlDeviceRegisterEvents)                              \
    X(nvmlDeviceGetSupportedEventTypes)                      \
    X(nvmlEventSetWait)                                      \
    X(nvmlEventSetFree)                                      \
    X(nvmlDeviceSetMigMode)                                  \
    X(nvmlDeviceGetMigMode)                                  \
    X(nvmlDeviceGetGpuInstanceProfileInfo)                   \
    X(nvmlDeviceGetGpuInstancePossiblePlacements)            \
    X(nvmlDeviceGetGpuInstanceRemainingCapacity)             \
    X(nvmlDeviceCreateGpuInstance)                           \
    X(nvmlDeviceCreateGpuInstanceWithPlacement)              \
    X(nvmlGpuInstanceDestroy)                                \
    X(nvmlDeviceGetGpuInstances)                             \
    X(nvmlDeviceGetGpuInstanceById)                          \
    X(nvmlGpuInstanceGetInfo)                                \
    X(nvmlGpuInstanceGetComputeInstanceProfileInfo)          \
    X(nvmlGpuInstanceGetComputeInstanceRemainingCapacity)    \
    X(nvmlGpuInstanceGetComputeInstancePossiblePlacements)   \
    X(nvmlGpuInstanceCreateComputeInstance)                  \
    X(nvmlGpuInstanceCreateComputeInstanceWithPlacement)     \
    X(nvmlComputeInstanceDestroy)                            \
    X(nvmlGpuInstanceGetComputeInstances)                    \
    X(nvmlGpuInstanceGetComputeInstanceById)                 \
    X(nvmlComputeInstanceGetInfo)                            \
    X(nvmlDeviceIsMigDeviceHandle)                           \
    X(nvmlDeviceGetGpuInstanceId)                            \
    X(nvmlDeviceGetComputeInstanceId)                        \
    X(nvmlDeviceGetMaxMigDeviceCount)                        \
    X(nvmlDeviceGetMigDeviceHandleByIndex)                   \
    X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)

#define FAKE_FN_ENUM(name) FN_##name,
enum fake_fn { FAKE_FUNCTIONS(FAKE_FN_ENUM) FN_COUNT };
#undef FAKE_FN_ENUM

/* Injected return codes, indexed by enum fake_fn; 0 = behave normally. */
struct fake_errors {
    int any;
    int code[FN_COUNT];
};

struct fake_process {
    unsigned pid;
    unsigned long long used_mib;
    unsigned sm_util, mem_util;
    unsigned gi, ci;             /* FAKE_NO_INSTANCE: runs on the whole GPU */
};

struct fake_xid {
    unsigned long long xid;
    unsigned gi, ci;             /* FAKE_NO_INSTANCE unless the entry was an object */
};

struct fake_device {
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned long long memory_total_mib, memory_used_mib;
    unsigned utilization_gpu, utilization_memory;
    unsigned minor;
    unsigned pci_domain, pci_bus, pci_device;
    unsigned pci_device_id, pci_subsystem_id;
    int numa_node;               /* -1: not reported (NOT_SUPPORTED) */
    int cc_major, cc_minor;
    int mig_capable, mig_mode;   /* mig_mode: initial value only (state file wins) */
    const struct mig_model *model;
    size_t nprocesses;
    struct fake_process *processes;
    size_t nxids;
    struct fake_xid *xids;
    unsigned long long ecc_dbe_events;
    struct fake_errors errors;
};

struct fake_config {
    char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    char nvml_version[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    int cuda_driver_version;
    size_t ndevices;
    struct fake_device *devices;
    struct fake_errors errors;
};

/* Parse a config file's bytes.  On error returns -1 with a message in err
 * (the caller prefixes the file name). */
int fake_config_parse(const char *text, size_t len, struct fake_config *out, char *err, size_t errlen);
void fake_config_free(struct fake_config *cfg);

/* Read a whole file (at most max bytes). Returns NULL with err filled on failure. */
char *fake_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen);

#pragma GCC visibility pop

#endif
