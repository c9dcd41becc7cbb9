/*
 * nvml_sampler.h - one-call sampling of every device of a context into caller-owned arrays.
 *
 * vnv_sample() reads memory, utilisation, running processes and per-process utilisation of
 * every device in the context's table (nvml_context.h) and writes them into arrays the caller
 * allocated once; its own scratch buffers live in the context.  Not thread-safe per context.
 */
#ifndef VGPU_NVML_SAMPLER_H
#define VGPU_NVML_SAMPLER_H

#include <stdint.h>

#include "nvml_context.h"

/* Sentinels. */
#define VNV_NO_SAMPLE (-1)                  /* sm_util/mem_util: no utilisation sample for the pid */
#define VNV_VALUE_NOT_AVAILABLE UINT64_MAX  /* used_memory: NVML could not tell */
#define VNV_ID_NONE 0xFFFFFFFFu             /* gpu/compute instance id: not on a MIG instance */
#define VNV_MAX_PROCESS_SCRATCH 4096        /* processes/samples read per device per call, at most */

/* One device of one vnv_sample() call.  A *_rc other than 0 means the matching values are 0. */
typedef struct {
    int32_t handle_rc;          /* nvmlDeviceGetHandleByIndex at open/refresh; non-zero: every rc below equals it */
    int32_t memory_rc;          /* nvmlDeviceGetMemoryInfo */
    int32_t utilization_rc;     /* nvmlDeviceGetUtilizationRates (NOT_SUPPORTED on MIG-enabled GPUs) */
    int32_t processes_rc;       /* nvmlDeviceGetComputeRunningProcesses_v3 (or _v2) */
    int32_t process_util_rc;    /* nvmlDeviceGetProcessUtilization; NOT_FOUND = no sample newer than last seen */
    uint32_t utilization_gpu;   /* percent */
    uint32_t utilization_memory;
    uint32_t process_count;     /* rows written for this device */
    uint32_t process_total;     /* processes NVML reported (> process_count when truncated) */
    uint32_t processes_truncated;
    uint32_t util_samples;      /* utilisation samples NVML returned in this call */
    uint32_t reserved;
    uint64_t memory_total;      /* bytes */
    uint64_t memory_used;
    uint64_t memory_free;
    uint64_t util_last_seen;    /* newest sample timestamp seen so far (us); next call asks for newer */
} vnv_device_sample;

/* One running compute process, with its newest SM utilisation sample of this call. */
typedef struct {
    uint32_t pid;
    uint32_t gpu_instance_id;      /* VNV_ID_NONE when not on a MIG instance */
    uint32_t compute_instance_id;
    int32_t sm_util;               /* percent, or VNV_NO_SAMPLE */
    int32_t mem_util;
    uint32_t reserved;
    uint64_t used_memory;          /* bytes, or VNV_VALUE_NOT_AVAILABLE */
    uint64_t util_timestamp;       /* us, 0 without a sample */
} vnv_process_sample;

/* devs[dev_cap], procs[dev_cap * procs_per_device]; device i's rows start at
 * procs[i * procs_per_device].  Returns the number of devices written (<= dev_cap), or -1
 * on invalid arguments or when the scratch buffers cannot be allocated. */
int vnv_sample(vnv_ctx *ctx, vnv_device_sample *devs, uint32_t dev_cap,
               vnv_process_sample *procs, uint32_t procs_per_device);

#endif /* VGPU_NVML_SAMPLER_H */
