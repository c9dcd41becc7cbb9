/*
 * nvml_context_private.h - what the NVML components (nvml_context.c, nvml_sampler.c,
 * nvml_mig.c) share about a context: the symbol table and the vnv_ctx struct.
 *
 * Not a cffi component (there is no nvml_context_private.cdef): Python never sees it.
 * Function pointer types come from the prototypes in nvml_abi.h (via __typeof__), so the
 * compiler checks every call against the same ABI the fake NVML implements; the
 * prototypes themselves are never referenced, so nothing is linked.
 */
#ifndef VGPU_NVML_CONTEXT_PRIVATE_H
#define VGPU_NVML_CONTEXT_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "nvml_abi.h"
#include "nvml_context.h"

/* Every entry point any component calls, resolved once by vnv_open().
 * X(field, symbol, fallback symbol or NULL, required).  The order is the order of
 * vnv_missing_symbols().  Users: context (init ... handle_by_index, handle_by_uuid, uuid),
 * sampler (memory_info ... process_utilization), MIG (get_mig_mode ... mig_parent; the
 * bulk MIG-device read also calls uuid). */
#define VNV_SYMBOLS(X)                                                                           \
    X(init, nvmlInit_v2, "nvmlInit", 1)                                                          \
    X(shutdown, nvmlShutdown, NULL, 1)                                                           \
    X(error_string, nvmlErrorString, NULL, 1)                                                    \
    X(device_count, nvmlDeviceGetCount_v2, "nvmlDeviceGetCount", 1)                              \
    X(handle_by_index, nvmlDeviceGetHandleByIndex_v2, "nvmlDeviceGetHandleByIndex", 1)           \
    X(memory_info, nvmlDeviceGetMemoryInfo, NULL, 1)                                             \
    X(utilization, nvmlDeviceGetUtilizationRates, NULL, 1)                                       \
    X(running_processes, nvmlDeviceGetComputeRunningProcesses_v3,                                \
      "nvmlDeviceGetComputeRunningProcesses_v2", 0)                                              \
    X(process_utilization, nvmlDeviceGetProcessUtilization, NULL, 0)                             \
    X(handle_by_uuid, nvmlDeviceGetHandleByUUID, NULL, 0)                                        \
    X(uuid, nvmlDeviceGetUUID, NULL, 0)                                                          \
    X(get_mig_mode, nvmlDeviceGetMigMode, NULL, 0)                                               \
    X(set_mig_mode, nvmlDeviceSetMigMode, NULL, 0)                                               \
    X(gi_profile_info_v, nvmlDeviceGetGpuInstanceProfileInfoV, NULL, 0)                          \
    X(gi_profile_info, nvmlDeviceGetGpuInstanceProfileInfo, NULL, 0)                             \
    X(gi_placements, nvmlDeviceGetGpuInstancePossiblePlacements_v2, NULL, 0)                     \
    X(gi_create, nvmlDeviceCreateGpuInstance, NULL, 0)                                           \
    X(gi_create_placed, nvmlDeviceCreateGpuInstanceWithPlacement, NULL, 0)                       \
    X(gi_list, nvmlDeviceGetGpuInstances, NULL, 0)                                               \
    X(gi_by_id, nvmlDeviceGetGpuInstanceById, NULL, 0)                                           \
    X(gi_info, nvmlGpuInstanceGetInfo, NULL, 0)                                                  \
    X(gi_destroy, nvmlGpuInstanceDestroy, NULL, 0)                                               \
    X(ci_profile_info_v, nvmlGpuInstanceGetComputeInstanceProfileInfoV, NULL, 0)                 \
    X(ci_profile_info, nvmlGpuInstanceGetComputeInstanceProfileInfo, NULL, 0)                    \
    X(ci_create, nvmlGpuInstanceCreateComputeInstance, NULL, 0)                                  \
    X(ci_list, nvmlGpuInstanceGetComputeInstances, NULL, 0)                                      \
    X(ci_info, nvmlComputeInstanceGetInfo_v2, "nvmlComputeInstanceGetInfo", 0)                   \
    X(ci_destroy, nvmlComputeInstanceDestroy, NULL, 0)                                           \
    X(max_mig_devices, nvmlDeviceGetMaxMigDeviceCount, NULL, 0)                                  \
    X(mig_by_index, nvmlDeviceGetMigDeviceHandleByIndex, NULL, 0)                                \
    X(is_mig, nvmlDeviceIsMigDeviceHandle, NULL, 0)                                              \
    X(mig_gi_id, nvmlDeviceGetGpuInstanceId, NULL, 0)                                            \
    X(mig_ci_id, nvmlDeviceGetComputeInstanceId, NULL, 0)                                        \
    X(mig_parent, nvmlDeviceGetDeviceHandleFromMigDeviceHandle, NULL, 0)

struct vnv_fns {
#define VNV_FIELD(field, sym, fallback, required) __typeof__(&sym) field;
    VNV_SYMBOLS(VNV_FIELD)
#undef VNV_FIELD
};

/* The sampler's scratch buffers: grown on demand by nvml_sampler.c, freed by vnv_close(). */
struct vnv_scratch {
    nvmlProcessInfo_t *proc_buf;    /* proc_cap entries */
    uint32_t proc_cap;
    nvmlProcessUtilizationSample_t *util_buf; /* util_cap entries */
    uint32_t util_cap;
};

struct vnv_ctx {
    void *lib;                      /* the dlopen()ed library: the one loaded handle */
    int initialized;
    struct vnv_fns fn;
    char missing[1024];             /* comma-separated optional symbols the library lacks */
    uint32_t n_missing;
    uint32_t ndev;
    nvmlDevice_t *dev;              /* [ndev] */
    int32_t *dev_rc;                /* [ndev] handle lookup result */
    uint64_t *util_last_seen;       /* [ndev] newest process-utilisation timestamp seen */
    struct vnv_scratch scratch;
};

/* Guards of the pass-through calls: the entry point must have been resolved, pointers given. */
#define VNV_NEED(f)                                                                              \
    do {                                                                                         \
        if (!ctx || !ctx->fn.f)                                                                  \
            return ctx ? NVML_ERROR_FUNCTION_NOT_FOUND : NVML_ERROR_INVALID_ARGUMENT;            \
    } while (0)
#define VNV_NONNULL(...)                                                                         \
    do {                                                                                         \
        const void *ptrs_[] = {__VA_ARGS__};                                                     \
        for (size_t k_ = 0; k_ < sizeof ptrs_ / sizeof ptrs_[0]; k_++)                           \
            if (!ptrs_[k_])                                                                      \
                return NVML_ERROR_INVALID_ARGUMENT;                                              \
    } while (0)
#define VNV_DEV(d) ((nvmlDevice_t)(d))
#define VNV_GI(g) ((nvmlGpuInstance_t)(g))
#define VNV_CI(c) ((nvmlComputeInstance_t)(c))

/* Index of a physical device handle in the context's table, -1 if it is not there. */
__attribute__((visibility("hidden"))) int32_t vnv_index_of(const vnv_ctx *ctx, nvmlDevice_t h);

#endif /* VGPU_NVML_CONTEXT_PRIVATE_H */
