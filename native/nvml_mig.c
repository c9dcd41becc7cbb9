/*
 * nvml_mig.c - see nvml_mig.h: the MIG calls, through the entry points the context resolved.
 */
#define _GNU_SOURCE
#include "nvml_mig.h"

#include <string.h>

#include "nvml_context_private.h"

static void copy_name(char *dst, const char *src, size_t srclen)
{
    size_t n = strnlen(src, srclen);
    if (n >= VNV_NAME_LEN)
        n = VNV_NAME_LEN - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ------------------------------------------------------------------ one call each */

int vnv_get_mig_mode(const vnv_ctx *ctx, vnv_device_t dev, uint32_t *current, uint32_t *pending)
{
    VNV_NEED(get_mig_mode);
    VNV_NONNULL(dev, current, pending);
    unsigned int c = 0, p = 0;
    int rc = ctx->fn.get_mig_mode(VNV_DEV(dev), &c, &p);
    *current = c;
    *pending = p;
    return rc;
}

int vnv_set_mig_mode(const vnv_ctx *ctx, vnv_device_t dev, uint32_t mode, int32_t *activation)
{
    VNV_NEED(set_mig_mode);
    VNV_NONNULL(dev, activation);
    nvmlReturn_t act = NVML_SUCCESS;
    int rc = ctx->fn.set_mig_mode(VNV_DEV(dev), mode, &act);
    *activation = act;
    return rc;
}

int vnv_gi_profile_info(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile, vnv_gi_profile *out)
{
    VNV_NONNULL(ctx, dev, out);
    memset(out, 0, sizeof *out);
    if (ctx->fn.gi_profile_info_v) {
        nvmlGpuInstanceProfileInfo_v2_t v;
        memset(&v, 0, sizeof v);
        v.version = nvmlGpuInstanceProfileInfo_v2;
        int rc = ctx->fn.gi_profile_info_v(VNV_DEV(dev), profile, &v);
        if (rc != NVML_ERROR_FUNCTION_NOT_FOUND) {
            if (rc == NVML_SUCCESS) {
                out->id = v.id;
                out->is_p2p_supported = v.isP2pSupported;
                out->slice_count = v.sliceCount;
                out->instance_count = v.instanceCount;
                out->multiprocessor_count = v.multiprocessorCount;
                out->copy_engine_count = v.copyEngineCount;
                out->decoder_count = v.decoderCount;
                out->encoder_count = v.encoderCount;
                out->jpeg_count = v.jpegCount;
                out->ofa_count = v.ofaCount;
                out->memory_size_mb = v.memorySizeMB;
                out->has_name = 1;
                copy_name(out->name, v.name, sizeof v.name);
            }
            return rc;
        }
    }
    VNV_NEED(gi_profile_info);
    nvmlGpuInstanceProfileInfo_t v;
    memset(&v, 0, sizeof v);
    int rc = ctx->fn.gi_profile_info(VNV_DEV(dev), profile, &v);
    if (rc == NVML_SUCCESS) {
        out->id = v.id;
        out->is_p2p_supported = v.isP2pSupported;
        out->slice_count = v.sliceCount;
        out->instance_count = v.instanceCount;
        out->multiprocessor_count = v.multiprocessorCount;
        out->copy_engine_count = v.copyEngineCount;
        out->decoder_count = v.decoderCount;
        out->encoder_count = v.encoderCount;
        out->jpeg_count = v.jpegCount;
        out->ofa_count = v.ofaCount;
        out->memory_size_mb = v.memorySizeMB;
    }
    return rc;
}

int vnv_gi_possible_placements(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile_id,
                               vnv_placement *out, uint32_t cap, uint32_t *count)
{
    VNV_NEED(gi_placements);
    VNV_NONNULL(dev, count);
    nvmlGpuInstancePlacement_t buf[VNV_MAX_INSTANCES];
    unsigned int n = VNV_MAX_INSTANCES;
    *count = 0;
    int rc = ctx->fn.gi_placements(VNV_DEV(dev), profile_id, buf, &n);
    if (rc != NVML_SUCCESS) {
        *count = n;
        return rc;
    }
    if (n > VNV_MAX_INSTANCES)
        n = VNV_MAX_INSTANCES;
    *count = n;
    if (n > cap || (n && !out))
        return NVML_ERROR_INSUFFICIENT_SIZE;
    for (uint32_t k = 0; k < n; k++) {
        out[k].start = buf[k].start;
        out[k].size = buf[k].size;
    }
    return NVML_SUCCESS;
}

int vnv_gi_create(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile_id, vnv_gpu_instance_t *out)
{
    VNV_NEED(gi_create);
    VNV_NONNULL(dev, out);
    nvmlGpuInstance_t gi = NULL;
    int rc = ctx->fn.gi_create(VNV_DEV(dev), profile_id, &gi);
    if (rc == NVML_SUCCESS)
        *out = (vnv_gpu_instance_t)gi;
    return rc;
}

int vnv_gi_create_with_placement(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile_id,
                                 uint32_t start, uint32_t size, vnv_gpu_instance_t *out)
{
    VNV_NEED(gi_create_placed);
    VNV_NONNULL(dev, out);
    nvmlGpuInstancePlacement_t pl = {.start = start, .size = size};
    nvmlGpuInstance_t gi = NULL;
    int rc = ctx->fn.gi_create_placed(VNV_DEV(dev), profile_id, &pl, &gi);
    if (rc == NVML_SUCCESS)
        *out = (vnv_gpu_instance_t)gi;
    return rc;
}

int vnv_gi_list(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile_id,
                vnv_gpu_instance_t *out, uint32_t cap, uint32_t *count)
{
    VNV_NEED(gi_list);
    VNV_NONNULL(dev, count);
    /* NVML writes up to the profile's instanceCount entries without reading *count as a
     * bound, so it gets a buffer larger than any profile allows; we copy what fits. */
    nvmlGpuInstance_t buf[VNV_MAX_INSTANCES];
    unsigned int n = VNV_MAX_INSTANCES;
    *count = 0;
    int rc = ctx->fn.gi_list(VNV_DEV(dev), profile_id, buf, &n);
    if (rc != NVML_SUCCESS)
        return rc;
    if (n > VNV_MAX_INSTANCES)
        n = VNV_MAX_INSTANCES;
    *count = n;
    if (n > cap || (n && !out))
        return NVML_ERROR_INSUFFICIENT_SIZE;
    for (uint32_t k = 0; k < n; k++)
        out[k] = (vnv_gpu_instance_t)buf[k];
    return NVML_SUCCESS;
}

int vnv_gi_by_id(const vnv_ctx *ctx, vnv_device_t dev, uint32_t id, vnv_gpu_instance_t *out)
{
    VNV_NEED(gi_by_id);
    VNV_NONNULL(dev, out);
    nvmlGpuInstance_t gi = NULL;
    int rc = ctx->fn.gi_by_id(VNV_DEV(dev), id, &gi);
    if (rc == NVML_SUCCESS)
        *out = (vnv_gpu_instance_t)gi;
    return rc;
}

int vnv_gi_get_info(const vnv_ctx *ctx, vnv_gpu_instance_t gi, vnv_gi_info *out)
{
    VNV_NEED(gi_info);
    VNV_NONNULL(gi, out);
    nvmlGpuInstanceInfo_t info;
    memset(&info, 0, sizeof info);
    memset(out, 0, sizeof *out);
    int rc = ctx->fn.gi_info(VNV_GI(gi), &info);
    if (rc == NVML_SUCCESS) {
        out->device_index = vnv_index_of(ctx, info.device);
        out->id = info.id;
        out->profile_id = info.profileId;
        out->placement_start = info.placement.start;
        out->placement_size = info.placement.size;
    }
    return rc;
}

int vnv_gi_destroy(const vnv_ctx *ctx, vnv_gpu_instance_t gi)
{
    VNV_NEED(gi_destroy);
    VNV_NONNULL(gi);
    return ctx->fn.gi_destroy(VNV_GI(gi));
}

int vnv_ci_profile_info(const vnv_ctx *ctx, vnv_gpu_instance_t gi, uint32_t profile, uint32_t eng_profile,
                        vnv_ci_profile *out)
{
    VNV_NONNULL(ctx, gi, out);
    memset(out, 0, sizeof *out);
    if (ctx->fn.ci_profile_info_v) {
        nvmlComputeInstanceProfileInfo_v2_t v;
        memset(&v, 0, sizeof v);
        v.version = nvmlComputeInstanceProfileInfo_v2;
        int rc = ctx->fn.ci_profile_info_v(VNV_GI(gi), profile, eng_profile, &v);
        if (rc != NVML_ERROR_FUNCTION_NOT_FOUND) {
            if (rc == NVML_SUCCESS) {
                out->id = v.id;
                out->slice_count = v.sliceCount;
                out->instance_count = v.instanceCount;
                out->multiprocessor_count = v.multiprocessorCount;
                out->shared_copy_engine_count = v.sharedCopyEngineCount;
                out->shared_decoder_count = v.sharedDecoderCount;
                out->shared_encoder_count = v.sharedEncoderCount;
                out->shared_jpeg_count = v.sharedJpegCount;
                out->shared_ofa_count = v.sharedOfaCount;
                out->has_name = 1;
                copy_name(out->name, v.name, sizeof v.name);
            }
            return rc;
        }
    }
    VNV_NEED(ci_profile_info);
    nvmlComputeInstanceProfileInfo_t v;
    memset(&v, 0, sizeof v);
    int rc = ctx->fn.ci_profile_info(VNV_GI(gi), profile, eng_profile, &v);
    if (rc == NVML_SUCCESS) {
        out->id = v.id;
        out->slice_count = v.sliceCount;
        out->instance_count = v.instanceCount;
        out->multiprocessor_count = v.multiprocessorCount;
        out->shared_copy_engine_count = v.sharedCopyEngineCount;
        out->shared_decoder_count = v.sharedDecoderCount;
        out->shared_encoder_count = v.sharedEncoderCount;
        out->shared_jpeg_count = v.sharedJpegCount;
        out->shared_ofa_count = v.sharedOfaCount;
    }
    return rc;
}

int vnv_ci_create(const vnv_ctx *ctx, vnv_gpu_instance_t gi, uint32_t profile_id, vnv_compute_instance_t *out)
{
    VNV_NEED(ci_create);
    VNV_NONNULL(gi, out);
    nvmlComputeInstance_t ci = NULL;
    int rc = ctx->fn.ci_create(VNV_GI(gi), profile_id, &ci);
    if (rc == NVML_SUCCESS)
        *out = (vnv_compute_instance_t)ci;
    return rc;
}

int vnv_ci_list(const vnv_ctx *ctx, vnv_gpu_instance_t gi, uint32_t profile_id,
                vnv_compute_instance_t *out, uint32_t cap, uint32_t *count)
{
    VNV_NEED(ci_list);
    VNV_NONNULL(gi, count);
    nvmlComputeInstance_t buf[VNV_MAX_INSTANCES]; /* see vnv_gi_list */
    unsigned int n = VNV_MAX_INSTANCES;
    *count = 0;
    int rc = ctx->fn.ci_list(VNV_GI(gi), profile_id, buf, &n);
    if (rc != NVML_SUCCESS)
        return rc;
    if (n > VNV_MAX_INSTANCES)
        n = VNV_MAX_INSTANCES;
    *count = n;
    if (n > cap || (n && !out))
        return NVML_ERROR_INSUFFICIENT_SIZE;
    for (uint32_t k = 0; k < n; k++)
        out[k] = (vnv_compute_instance_t)buf[k];
    return NVML_SUCCESS;
}

int vnv_ci_get_info(const vnv_ctx *ctx, vnv_compute_instance_t ci, vnv_ci_info *out)
{
    VNV_NEED(ci_info);
    VNV_NONNULL(ci, out);
    nvmlComputeInstanceInfo_t info;
    memset(&info, 0, sizeof info);
    memset(out, 0, sizeof *out);
    int rc = ctx->fn.ci_info(VNV_CI(ci), &info);
    if (rc == NVML_SUCCESS) {
        out->device_index = vnv_index_of(ctx, info.device);
        out->id = info.id;
        out->profile_id = info.profileId;
        out->placement_start = info.placement.start;
        out->placement_size = info.placement.size;
        out->gpu_instance = (vnv_gpu_instance_t)info.gpuInstance;
    }
    return rc;
}

int vnv_ci_destroy(const vnv_ctx *ctx, vnv_compute_instance_t ci)
{
    VNV_NEED(ci_destroy);
    VNV_NONNULL(ci);
    return ctx->fn.ci_destroy(VNV_CI(ci));
}

int vnv_max_mig_device_count(const vnv_ctx *ctx, vnv_device_t dev, uint32_t *count)
{
    VNV_NEED(max_mig_devices);
    VNV_NONNULL(dev, count);
    unsigned int n = 0;
    int rc = ctx->fn.max_mig_devices(VNV_DEV(dev), &n);
    *count = n;
    return rc;
}

int vnv_mig_device_by_index(const vnv_ctx *ctx, vnv_device_t dev, uint32_t index, vnv_device_t *out)
{
    VNV_NEED(mig_by_index);
    VNV_NONNULL(dev, out);
    nvmlDevice_t m = NULL;
    int rc = ctx->fn.mig_by_index(VNV_DEV(dev), index, &m);
    if (rc == NVML_SUCCESS)
        *out = (vnv_device_t)m;
    return rc;
}

int vnv_is_mig_device(const vnv_ctx *ctx, vnv_device_t dev, uint32_t *is_mig)
{
    VNV_NEED(is_mig);
    VNV_NONNULL(dev, is_mig);
    unsigned int v = 0;
    int rc = ctx->fn.is_mig(VNV_DEV(dev), &v);
    *is_mig = v;
    return rc;
}

int vnv_mig_gpu_instance_id(const vnv_ctx *ctx, vnv_device_t mig, uint32_t *id)
{
    VNV_NEED(mig_gi_id);
    VNV_NONNULL(mig, id);
    unsigned int v = 0;
    int rc = ctx->fn.mig_gi_id(VNV_DEV(mig), &v);
    *id = v;
    return rc;
}

int vnv_mig_compute_instance_id(const vnv_ctx *ctx, vnv_device_t mig, uint32_t *id)
{
    VNV_NEED(mig_ci_id);
    VNV_NONNULL(mig, id);
    unsigned int v = 0;
    int rc = ctx->fn.mig_ci_id(VNV_DEV(mig), &v);
    *id = v;
    return rc;
}

int vnv_parent_of_mig_device(const vnv_ctx *ctx, vnv_device_t mig, vnv_device_t *out)
{
    VNV_NEED(mig_parent);
    VNV_NONNULL(mig, out);
    nvmlDevice_t p = NULL;
    int rc = ctx->fn.mig_parent(VNV_DEV(mig), &p);
    if (rc == NVML_SUCCESS)
        *out = (vnv_device_t)p;
    return rc;
}

/* ------------------------------------------------------------------ bulk MIG reads */

static int mig_fail(vnv_mig_status *st, uint32_t call, uint32_t arg, int rc)
{
    st->call = call;
    st->arg = arg;
    return rc;
}

/* The CIs of one GI for the query's CI profiles, appended to cis[*n_ci ..]. */
static int read_cis(const vnv_ctx *ctx, const vnv_instance_query *q, nvmlGpuInstance_t gi, vnv_ci_row *cis,
                    uint32_t ci_cap, vnv_mig_status *st)
{
    uint32_t nprof = q->n_ci_profiles < VNV_MAX_CI_PROFILES ? q->n_ci_profiles : VNV_MAX_CI_PROFILES;
    for (uint32_t p = 0; p < nprof; p++) {
        uint32_t pid = q->ci_profile_ids[p];
        if (!ctx->fn.ci_list)
            return mig_fail(st, VNV_CALL_CI_LIST, pid, NVML_ERROR_FUNCTION_NOT_FOUND);
        nvmlComputeInstance_t buf[VNV_MAX_INSTANCES]; /* see vnv_gi_list */
        unsigned int n = VNV_MAX_INSTANCES;
        int rc = ctx->fn.ci_list(gi, pid, buf, &n);
        if (rc != NVML_SUCCESS)
            return mig_fail(st, VNV_CALL_CI_LIST, pid, rc);
        if (n > VNV_MAX_INSTANCES)
            n = VNV_MAX_INSTANCES;
        if (n > ci_cap - st->n_ci)
            return mig_fail(st, VNV_CALL_CI_LIST, pid, NVML_ERROR_INSUFFICIENT_SIZE);
        for (uint32_t k = 0; k < n; k++) {
            if (!ctx->fn.ci_info)
                return mig_fail(st, VNV_CALL_CI_INFO, 0, NVML_ERROR_FUNCTION_NOT_FOUND);
            nvmlComputeInstanceInfo_t info;
            memset(&info, 0, sizeof info);
            rc = ctx->fn.ci_info(buf[k], &info);
            if (rc != NVML_SUCCESS)
                return mig_fail(st, VNV_CALL_CI_INFO, 0, rc);
            vnv_ci_row *c = &cis[st->n_ci++];
            c->handle = (vnv_compute_instance_t)buf[k];
            c->id = info.id;
            c->ci_profile = p;
        }
    }
    return NVML_SUCCESS;
}

int vnv_mig_read_instances(const vnv_ctx *ctx, vnv_device_t dev, const vnv_instance_query *queries, uint32_t nq,
                           vnv_gi_row *gis, uint32_t gi_cap, vnv_ci_row *cis, uint32_t ci_cap,
                           vnv_mig_status *status)
{
    VNV_NONNULL(ctx, dev, status);
    memset(status, 0, sizeof *status);
    if (nq && !queries)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((gi_cap && !gis) || (ci_cap && !cis))
        return NVML_ERROR_INVALID_ARGUMENT;
    for (uint32_t qi = 0; qi < nq; qi++) {
        const vnv_instance_query *q = &queries[qi];
        if (!ctx->fn.gi_list)
            return mig_fail(status, VNV_CALL_GI_LIST, q->gi_profile_id, NVML_ERROR_FUNCTION_NOT_FOUND);
        nvmlGpuInstance_t buf[VNV_MAX_INSTANCES]; /* see vnv_gi_list */
        unsigned int n = VNV_MAX_INSTANCES;
        int rc = ctx->fn.gi_list(VNV_DEV(dev), q->gi_profile_id, buf, &n);
        if (rc != NVML_SUCCESS)
            return mig_fail(status, VNV_CALL_GI_LIST, q->gi_profile_id, rc);
        if (n > VNV_MAX_INSTANCES)
            n = VNV_MAX_INSTANCES;
        if (n > gi_cap - status->n_gi)
            return mig_fail(status, VNV_CALL_GI_LIST, q->gi_profile_id, NVML_ERROR_INSUFFICIENT_SIZE);
        for (uint32_t k = 0; k < n; k++) {
            if (!ctx->fn.gi_info)
                return mig_fail(status, VNV_CALL_GI_INFO, 0, NVML_ERROR_FUNCTION_NOT_FOUND);
            nvmlGpuInstanceInfo_t info;
            memset(&info, 0, sizeof info);
            rc = ctx->fn.gi_info(buf[k], &info);
            if (rc != NVML_SUCCESS)
                return mig_fail(status, VNV_CALL_GI_INFO, 0, rc);
            vnv_gi_row *g = &gis[status->n_gi++];
            memset(g, 0, sizeof *g);
            g->handle = (vnv_gpu_instance_t)buf[k];
            g->query = qi;
            g->id = info.id;
            g->profile_id = info.profileId;
            g->placement_start = info.placement.start;
            g->placement_size = info.placement.size;
            g->ci_first = status->n_ci;
            if (q->n_ci_profiles == VNV_CI_PROFILES_UNKNOWN)
                continue;
            g->cis_read = 1;
            rc = read_cis(ctx, q, buf[k], cis, ci_cap, status);
            if (rc != NVML_SUCCESS)
                return rc;
            g->ci_count = status->n_ci - g->ci_first;
        }
    }
    return NVML_SUCCESS;
}

int vnv_mig_devices(const vnv_ctx *ctx, vnv_device_t dev, vnv_mig_device_row *out, uint32_t cap,
                    vnv_mig_status *status)
{
    VNV_NONNULL(ctx, dev, status);
    memset(status, 0, sizeof *status);
    if (cap && !out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!ctx->fn.max_mig_devices)
        return mig_fail(status, VNV_CALL_MAX_MIG, 0, NVML_ERROR_FUNCTION_NOT_FOUND);
    unsigned int count = 0;
    int rc = ctx->fn.max_mig_devices(VNV_DEV(dev), &count);
    if (rc != NVML_SUCCESS)
        return mig_fail(status, VNV_CALL_MAX_MIG, 0, rc);
    for (uint32_t i = 0; i < count; i++) {
        if (!ctx->fn.mig_by_index)
            return mig_fail(status, VNV_CALL_MIG_BY_INDEX, i, NVML_ERROR_FUNCTION_NOT_FOUND);
        nvmlDevice_t m = NULL;
        rc = ctx->fn.mig_by_index(VNV_DEV(dev), i, &m);
        if (rc == NVML_ERROR_NOT_FOUND)
            continue;
        if (rc != NVML_SUCCESS)
            return mig_fail(status, VNV_CALL_MIG_BY_INDEX, i, rc);
        if (status->n_gi >= cap)
            return mig_fail(status, VNV_CALL_MIG_BY_INDEX, i, NVML_ERROR_INSUFFICIENT_SIZE);
        vnv_mig_device_row *r = &out[status->n_gi];
        memset(r, 0, sizeof *r);
        r->index = i;
        unsigned int v = 0;
        if (!ctx->fn.mig_gi_id)
            return mig_fail(status, VNV_CALL_MIG_GI_ID, i, NVML_ERROR_FUNCTION_NOT_FOUND);
        if ((rc = ctx->fn.mig_gi_id(m, &v)) != NVML_SUCCESS)
            return mig_fail(status, VNV_CALL_MIG_GI_ID, i, rc);
        r->gpu_instance_id = v;
        if (!ctx->fn.mig_ci_id)
            return mig_fail(status, VNV_CALL_MIG_CI_ID, i, NVML_ERROR_FUNCTION_NOT_FOUND);
        if ((rc = ctx->fn.mig_ci_id(m, &v)) != NVML_SUCCESS)
            return mig_fail(status, VNV_CALL_MIG_CI_ID, i, rc);
        r->compute_instance_id = v;
        if (!ctx->fn.uuid)
            return mig_fail(status, VNV_CALL_UUID, i, NVML_ERROR_FUNCTION_NOT_FOUND);
        if ((rc = ctx->fn.uuid(m, r->uuid, VNV_UUID_LEN)) != NVML_SUCCESS)
            return mig_fail(status, VNV_CALL_UUID, i, rc);
        r->uuid[VNV_UUID_LEN - 1] = '\0';
        status->n_gi++;
    }
    return NVML_SUCCESS;
}
