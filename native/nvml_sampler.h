/*
 * nvml_sampler.h - the NVML native layer: run-time loading, one-call sampling of every
 * device, and thin MIG wrappers.
 *
 * NVML is never linked: vnv_open() dlopen()s the library by path and resolves each entry
 * point with dlsym().  All state lives in the opaque vnv_ctx returned by vnv_open(): the
 * library handle, the resolved function table, the device handles and the scratch
 * buffers of the sampler.  There is no other global state.  A context is not
 * thread-safe for vnv_sample()/vnv_refresh(); the MIG calls only read it.
 *
 * Every function returns an nvmlReturn_t value (0 = NVML_SUCCESS).  An optional NVML
 * entry point that the library lacks yields NVML_ERROR_FUNCTION_NOT_FOUND (13).
 * This header deliberately does not include nvml_abi.h: Python (cffi) only sees the
 * vnv_* types below.
 */
#ifndef VGPU_NVML_SAMPLER_H
#define VGPU_NVML_SAMPLER_H

#include <stdint.h>

/* Sentinels. */
#define VNV_NO_SAMPLE (-1)                  /* sm_util/mem_util: no utilisation sample for the pid */
#define VNV_VALUE_NOT_AVAILABLE UINT64_MAX  /* used_memory: NVML could not tell */
#define VNV_ID_NONE 0xFFFFFFFFu             /* gpu/compute instance id: not on a MIG instance */
#define VNV_MAX_DEVICES 256                 /* devices a context enumerates at most */
#define VNV_MAX_PROCESS_SCRATCH 4096        /* processes/samples read per device per call, at most */
#define VNV_MAX_INSTANCES 64                /* GI/CI handles or placements returned by one call */
#define VNV_NAME_LEN 96
#define VNV_UUID_LEN 96                     /* NVML_DEVICE_UUID_V2_BUFFER_SIZE (80), rounded up */
#define VNV_MAX_CI_PROFILES 16              /* CI profile ids one layout query lists per GI profile */
#define VNV_CI_PROFILES_UNKNOWN 0xFFFFFFFFu /* layout query: list the GIs only, not their CIs */

/* Which NVML call of a bulk MIG read failed (vnv_mig_status.call). */
#define VNV_CALL_NONE 0
#define VNV_CALL_GI_LIST 1                  /* nvmlDeviceGetGpuInstances(arg = profileId) */
#define VNV_CALL_GI_INFO 2                  /* nvmlGpuInstanceGetInfo */
#define VNV_CALL_CI_LIST 3                  /* nvmlGpuInstanceGetComputeInstances(arg = profileId) */
#define VNV_CALL_CI_INFO 4                  /* nvmlComputeInstanceGetInfo_v2 */
#define VNV_CALL_MAX_MIG 5                  /* nvmlDeviceGetMaxMigDeviceCount */
#define VNV_CALL_MIG_BY_INDEX 6             /* nvmlDeviceGetMigDeviceHandleByIndex(arg = index) */
#define VNV_CALL_MIG_GI_ID 7                /* nvmlDeviceGetGpuInstanceId */
#define VNV_CALL_MIG_CI_ID 8                /* nvmlDeviceGetComputeInstanceId */
#define VNV_CALL_UUID 9                     /* nvmlDeviceGetUUID */

typedef struct vnv_ctx vnv_ctx;
/* Opaque NVML handles, distinct types so a GI cannot be passed where a CI is expected. */
typedef struct vnv_device_s *vnv_device_t;
typedef struct vnv_gpu_instance_s *vnv_gpu_instance_t;
typedef struct vnv_compute_instance_s *vnv_compute_instance_t;

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

typedef struct {
    uint32_t start;
    uint32_t size;
} vnv_placement;

typedef struct {
    uint32_t id;                   /* profileId used by every other GI call */
    uint32_t is_p2p_supported;
    uint32_t slice_count;
    uint32_t instance_count;
    uint32_t multiprocessor_count;
    uint32_t copy_engine_count;
    uint32_t decoder_count;
    uint32_t encoder_count;
    uint32_t jpeg_count;
    uint32_t ofa_count;
    uint64_t memory_size_mb;
    uint32_t has_name;             /* 0 when only the v1 call was available */
    char name[VNV_NAME_LEN];
} vnv_gi_profile;

typedef struct {
    int32_t device_index;          /* parent in this context's index order, -1 if unknown */
    uint32_t id;
    uint32_t profile_id;
    uint32_t placement_start;
    uint32_t placement_size;
} vnv_gi_info;

typedef struct {
    uint32_t id;
    uint32_t slice_count;
    uint32_t instance_count;
    uint32_t multiprocessor_count;
    uint32_t shared_copy_engine_count;
    uint32_t shared_decoder_count;
    uint32_t shared_encoder_count;
    uint32_t shared_jpeg_count;
    uint32_t shared_ofa_count;
    uint32_t has_name;
    char name[VNV_NAME_LEN];
} vnv_ci_profile;

typedef struct {
    int32_t device_index;
    uint32_t id;
    uint32_t profile_id;
    uint32_t placement_start;
    uint32_t placement_size;
    vnv_gpu_instance_t gpu_instance;
} vnv_ci_info;

/* Bulk MIG reads (one Python -> C crossing for a whole query; the NVML calls and their order
 * are those of the per-call wrappers).  Input: one query per GI profile. */
typedef struct {
    uint32_t gi_profile_id;
    uint32_t n_ci_profiles;        /* VNV_CI_PROFILES_UNKNOWN: do not read this profile's CIs */
    uint32_t ci_profile_ids[VNV_MAX_CI_PROFILES];
} vnv_layout_query;

/* One GPU instance found by vnv_mig_read_layout. */
typedef struct {
    vnv_gpu_instance_t handle;
    uint32_t query;                /* index of the query (GI profile) it was listed under */
    uint32_t id;
    uint32_t profile_id;
    uint32_t placement_start;
    uint32_t placement_size;
    uint32_t ci_first;             /* its CIs are cis[ci_first .. ci_first + ci_count) */
    uint32_t ci_count;
    uint32_t cis_read;             /* 0 when its query's CI profiles were unknown */
} vnv_layout_gi;

typedef struct {
    vnv_compute_instance_t handle;
    uint32_t id;
    uint32_t ci_profile;           /* index into its query's ci_profile_ids */
} vnv_layout_ci;

/* One MIG device found by vnv_mig_devices. */
typedef struct {
    uint32_t index;
    uint32_t gpu_instance_id;
    uint32_t compute_instance_id;
    char uuid[VNV_UUID_LEN];
} vnv_mig_device_row;

/* Counts written and, on failure, which call failed with which argument. */
typedef struct {
    uint32_t n_gi;
    uint32_t n_ci;
    uint32_t call;                 /* VNV_CALL_*; VNV_CALL_NONE on success */
    uint32_t arg;
} vnv_mig_status;

/* ---- lifecycle */
int vnv_open(const char *library_path, vnv_ctx **out, char *err, uint32_t errlen);
void vnv_close(vnv_ctx *ctx);
int vnv_refresh(vnv_ctx *ctx, char *err, uint32_t errlen);
uint32_t vnv_device_count(const vnv_ctx *ctx);
const char *vnv_error_string(const vnv_ctx *ctx, int rc);
uint32_t vnv_missing_symbols(const vnv_ctx *ctx, char *buf, uint32_t len);

/* ---- sampling: devs[dev_cap], procs[dev_cap * procs_per_device]; device i's rows start at
 * procs[i * procs_per_device].  Returns the number of devices written (<= dev_cap), or -1
 * on invalid arguments. */
int vnv_sample(vnv_ctx *ctx, vnv_device_sample *devs, uint32_t dev_cap,
               vnv_process_sample *procs, uint32_t procs_per_device);

/* ---- device handles */
int vnv_device_handle(const vnv_ctx *ctx, uint32_t index, vnv_device_t *out);
int vnv_device_handle_by_uuid(const vnv_ctx *ctx, const char *uuid, vnv_device_t *out);
int vnv_device_uuid(const vnv_ctx *ctx, vnv_device_t dev, char *buf, uint32_t len);

/* ---- MIG */
int vnv_get_mig_mode(const vnv_ctx *ctx, vnv_device_t dev, uint32_t *current, uint32_t *pending);
int vnv_set_mig_mode(const vnv_ctx *ctx, vnv_device_t dev, uint32_t mode, int32_t *activation);
int vnv_gi_profile_info(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile, vnv_gi_profile *out);
int vnv_gi_possible_placements(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile_id,
                               vnv_placement *out, uint32_t cap, uint32_t *count);
int vnv_gi_create(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile_id, vnv_gpu_instance_t *out);
int vnv_gi_create_with_placement(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile_id,
                                 uint32_t start, uint32_t size, vnv_gpu_instance_t *out);
int vnv_gi_list(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile_id,
                vnv_gpu_instance_t *out, uint32_t cap, uint32_t *count);
int vnv_gi_by_id(const vnv_ctx *ctx, vnv_device_t dev, uint32_t id, vnv_gpu_instance_t *out);
int vnv_gi_get_info(const vnv_ctx *ctx, vnv_gpu_instance_t gi, vnv_gi_info *out);
int vnv_gi_destroy(const vnv_ctx *ctx, vnv_gpu_instance_t gi);
int vnv_ci_profile_info(const vnv_ctx *ctx, vnv_gpu_instance_t gi, uint32_t profile, uint32_t eng_profile,
                        vnv_ci_profile *out);
int vnv_ci_create(const vnv_ctx *ctx, vnv_gpu_instance_t gi, uint32_t profile_id, vnv_compute_instance_t *out);
int vnv_ci_list(const vnv_ctx *ctx, vnv_gpu_instance_t gi, uint32_t profile_id,
                vnv_compute_instance_t *out, uint32_t cap, uint32_t *count);
int vnv_ci_get_info(const vnv_ctx *ctx, vnv_compute_instance_t ci, vnv_ci_info *out);
int vnv_ci_destroy(const vnv_ctx *ctx, vnv_compute_instance_t ci);
int vnv_max_mig_device_count(const vnv_ctx *ctx, vnv_device_t dev, uint32_t *count);
int vnv_mig_device_by_index(const vnv_ctx *ctx, vnv_device_t dev, uint32_t index, vnv_device_t *out);
int vnv_is_mig_device(const vnv_ctx *ctx, vnv_device_t dev, uint32_t *is_mig);
int vnv_mig_gpu_instance_id(const vnv_ctx *ctx, vnv_device_t mig, uint32_t *id);
int vnv_mig_compute_instance_id(const vnv_ctx *ctx, vnv_device_t mig, uint32_t *id);
int vnv_parent_of_mig_device(const vnv_ctx *ctx, vnv_device_t mig, vnv_device_t *out);

/* ---- bulk MIG reads.  For each query in order: nvmlDeviceGetGpuInstances, then per GI its
 * info and, per CI profile of the query, nvmlGpuInstanceGetComputeInstances and each CI's
 * info.  Stops at the first failing call (status->call names it) and returns its code;
 * NVML_ERROR_INSUFFICIENT_SIZE when gis[gi_cap] or cis[ci_cap] would overflow. */
int vnv_mig_read_layout(const vnv_ctx *ctx, vnv_device_t dev, const vnv_layout_query *queries, uint32_t nq,
                        vnv_layout_gi *gis, uint32_t gi_cap, vnv_layout_ci *cis, uint32_t ci_cap,
                        vnv_mig_status *status);
/* Every MIG device of `dev`: nvmlDeviceGetMaxMigDeviceCount, then per index the handle
 * (NOT_FOUND: skipped), its GI id, CI id and UUID.  status->n_gi = rows written. */
int vnv_mig_devices(const vnv_ctx *ctx, vnv_device_t dev, vnv_mig_device_row *out, uint32_t cap,
                    vnv_mig_status *status);

#endif /* VGPU_NVML_SAMPLER_H */
