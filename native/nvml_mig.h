/*
 * nvml_mig.h - the NVML MIG calls of a context: thin wrappers, one per NVML entry point, and
 * two bulk reads that loop over the same calls in C.
 *
 * Every function returns an nvmlReturn_t value (0 = NVML_SUCCESS); an entry point the loaded
 * library lacks yields NVML_ERROR_FUNCTION_NOT_FOUND (13).  The calls only read the context
 * (nvml_context.h), so they may run in parallel with each other.
 */
#ifndef VGPU_NVML_MIG_H
#define VGPU_NVML_MIG_H

#include <stdint.h>

#include "nvml_context.h"

#define VNV_MAX_INSTANCES 64                /* GI/CI handles or placements returned by one call */
#define VNV_NAME_LEN 96
#define VNV_MAX_CI_PROFILES 16              /* CI profile ids one instance query lists per GI profile */
#define VNV_CI_PROFILES_UNKNOWN 0xFFFFFFFFu /* instance query: list the GIs only, not their CIs */

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
} vnv_instance_query;

/* One GPU instance found by vnv_mig_read_instances. */
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
} vnv_gi_row;

/* One compute instance found by vnv_mig_read_instances. */
typedef struct {
    vnv_compute_instance_t handle;
    uint32_t id;
    uint32_t ci_profile;           /* index into its query's ci_profile_ids */
} vnv_ci_row;

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

/* ---- MIG mode, GPU instances, compute instances, MIG devices: one NVML call each */
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
int vnv_mig_read_instances(const vnv_ctx *ctx, vnv_device_t dev, const vnv_instance_query *queries, uint32_t nq,
                           vnv_gi_row *gis, uint32_t gi_cap, vnv_ci_row *cis, uint32_t ci_cap,
                           vnv_mig_status *status);
/* Every MIG device of `dev`: nvmlDeviceGetMaxMigDeviceCount, then per index the handle
 * (NOT_FOUND: skipped), its GI id, CI id and UUID.  status->n_gi = rows written. */
int vnv_mig_devices(const vnv_ctx *ctx, vnv_device_t dev, vnv_mig_device_row *out, uint32_t cap,
                    vnv_mig_status *status);

#endif /* VGPU_NVML_MIG_H */
