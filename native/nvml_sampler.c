/*
 * nvml_sampler.c - see nvml_sampler.h.
 *
 * Function pointer types come from the prototypes in nvml_abi.h (via __typeof__), so the
 * compiler checks every call against the same ABI the fake NVML implements; the
 * prototypes themselves are never referenced, so nothing is linked.
 */
#define _GNU_SOURCE
#include "nvml_sampler.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_abi.h"

/* X(field, symbol, fallback symbol or NULL, required) */
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

struct vnv_ctx {
    void *lib;
    int initialized;
    struct vnv_fns fn;
    char missing[1024];             /* comma-separated optional symbols the library lacks */
    uint32_t n_missing;
    uint32_t ndev;
    nvmlDevice_t *dev;              /* [ndev] */
    int32_t *dev_rc;                /* [ndev] handle lookup result */
    uint64_t *util_last_seen;       /* [ndev] newest process-utilisation timestamp seen */
    nvmlProcessInfo_t *proc_buf;    /* scratch, proc_cap entries */
    uint32_t proc_cap;
    nvmlProcessUtilizationSample_t *util_buf; /* scratch, util_cap entries */
    uint32_t util_cap;
};

static void set_err(char *err, uint32_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static void note_missing(vnv_ctx *ctx, const char *sym)
{
    size_t used = strlen(ctx->missing);
    size_t room = sizeof(ctx->missing) - used;
    ctx->n_missing++;
    if (room > 1)
        snprintf(ctx->missing + used, room, "%s%s", used ? "," : "", sym);
}

static int missing_required(const char *path, const char *sym, const char *fallback, char *err, uint32_t errlen)
{
    if (fallback)
        set_err(err, errlen, "NVML library %s lacks required symbol %s (and its fallback %s)", path, sym, fallback);
    else
        set_err(err, errlen, "NVML library %s lacks required symbol %s", path, sym);
    return NVML_ERROR_FUNCTION_NOT_FOUND;
}

/* Resolve every symbol; a missing required one fails (NVML_ERROR_FUNCTION_NOT_FOUND), a
 * missing optional one is recorded in ctx->missing and its calls answer FUNCTION_NOT_FOUND. */
static int resolve(vnv_ctx *ctx, const char *path, char *err, uint32_t errlen)
{
    void *p;
    const char *fb;
#define VNV_RESOLVE(field, sym, fallback, required)                                              \
    fb = (fallback);                                                                             \
    p = dlsym(ctx->lib, #sym);                                                                   \
    if (!p && fb)                                                                                \
        p = dlsym(ctx->lib, fb);                                                                 \
    if (!p) {                                                                                    \
        if (required)                                                                            \
            return missing_required(path, #sym, fb, err, errlen);                                \
        note_missing(ctx, #sym);                                                                 \
    }                                                                                            \
    memcpy(&ctx->fn.field, &p, sizeof p);
    VNV_SYMBOLS(VNV_RESOLVE)
#undef VNV_RESOLVE
    return NVML_SUCCESS;
}

/* (Re)build the device table; on failure the old table is kept. */
static int enumerate(vnv_ctx *ctx, char *err, uint32_t errlen)
{
    unsigned int count = 0;
    nvmlReturn_t rc = ctx->fn.device_count(&count);
    if (rc != NVML_SUCCESS) {
        set_err(err, errlen, "nvmlDeviceGetCount: %s", ctx->fn.error_string(rc));
        return rc;
    }
    if (count > VNV_MAX_DEVICES)
        count = VNV_MAX_DEVICES;
    uint32_t alloc = count ? count : 1;
    nvmlDevice_t *dev = calloc(alloc, sizeof *dev);
    int32_t *dev_rc = calloc(alloc, sizeof *dev_rc);
    uint64_t *seen = calloc(alloc, sizeof *seen);
    if (!dev || !dev_rc || !seen) {
        free(dev);
        free(dev_rc);
        free(seen);
        set_err(err, errlen, "out of memory for %u device handles", count);
        return NVML_ERROR_MEMORY;
    }
    for (uint32_t i = 0; i < count; i++) {
        dev_rc[i] = ctx->fn.handle_by_index(i, &dev[i]);
        /* Keep the utilisation window of a device whose handle did not change. */
        for (uint32_t j = 0; j < ctx->ndev; j++)
            if (dev_rc[i] == NVML_SUCCESS && ctx->dev[j] == dev[i])
                seen[i] = ctx->util_last_seen[j];
    }
    free(ctx->dev);
    free(ctx->dev_rc);
    free(ctx->util_last_seen);
    ctx->dev = dev;
    ctx->dev_rc = dev_rc;
    ctx->util_last_seen = seen;
    ctx->ndev = count;
    return NVML_SUCCESS;
}

void vnv_close(vnv_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->initialized && ctx->fn.shutdown)
        ctx->fn.shutdown();
    if (ctx->lib)
        dlclose(ctx->lib);
    free(ctx->dev);
    free(ctx->dev_rc);
    free(ctx->util_last_seen);
    free(ctx->proc_buf);
    free(ctx->util_buf);
    free(ctx);
}

int vnv_open(const char *library_path, vnv_ctx **out, char *err, uint32_t errlen)
{
    if (!out || !library_path || !*library_path) {
        set_err(err, errlen, "no NVML library path given");
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *out = NULL;
    vnv_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        set_err(err, errlen, "out of memory");
        return NVML_ERROR_MEMORY;
    }
    dlerror();
    ctx->lib = dlopen(library_path, RTLD_NOW | RTLD_LOCAL);
    if (!ctx->lib) {
        const char *why = dlerror();
        set_err(err, errlen, "cannot load NVML library %s: %s", library_path, why ? why : "dlopen failed");
        vnv_close(ctx);
        return NVML_ERROR_LIBRARY_NOT_FOUND;
    }
    int rc = resolve(ctx, library_path, err, errlen);
    if (rc != NVML_SUCCESS) {
        vnv_close(ctx);
        return rc;
    }
    rc = ctx->fn.init();
    if (rc != NVML_SUCCESS) {
        set_err(err, errlen, "nvmlInit failed for %s: %s", library_path, ctx->fn.error_string(rc));
        vnv_close(ctx);
        return rc;
    }
    ctx->initialized = 1;
    rc = enumerate(ctx, err, errlen);
    if (rc != NVML_SUCCESS) {
        vnv_close(ctx);
        return rc;
    }
    *out = ctx;
    return NVML_SUCCESS;
}

int vnv_refresh(vnv_ctx *ctx, char *err, uint32_t errlen)
{
    if (!ctx)
        return NVML_ERROR_INVALID_ARGUMENT;
    return enumerate(ctx, err, errlen);
}

uint32_t vnv_device_count(const vnv_ctx *ctx)
{
    return ctx ? ctx->ndev : 0;
}

const char *vnv_error_string(const vnv_ctx *ctx, int rc)
{
    const char *s = (ctx && ctx->fn.error_string) ? ctx->fn.error_string((nvmlReturn_t)rc) : NULL;
    return s ? s : "Unknown NVML error";
}

uint32_t vnv_missing_symbols(const vnv_ctx *ctx, char *buf, uint32_t len)
{
    if (!ctx)
        return 0;
    if (buf && len)
        snprintf(buf, len, "%s", ctx->missing);
    return ctx->n_missing;
}

/* ------------------------------------------------------------------ sampling */

/* Grow a scratch buffer to hold at least `want` entries (bounded); 1 when it grew. */
static int grow(void **buf, uint32_t *cap, uint32_t want, size_t elem)
{
    if (want > VNV_MAX_PROCESS_SCRATCH)
        want = VNV_MAX_PROCESS_SCRATCH;
    if (want <= *cap)
        return 0;
    void *p = realloc(*buf, (size_t)want * elem);
    if (!p)
        return 0;
    *buf = p;
    *cap = want;
    return 1;
}

static void sample_processes(vnv_ctx *ctx, nvmlDevice_t h, vnv_device_sample *d,
                             vnv_process_sample *rows, uint32_t room)
{
    if (!ctx->fn.running_processes) {
        d->processes_rc = NVML_ERROR_FUNCTION_NOT_FOUND;
        return;
    }
    unsigned int n = ctx->proc_cap;
    nvmlReturn_t rc = ctx->fn.running_processes(h, &n, ctx->proc_buf);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE &&
        grow((void **)&ctx->proc_buf, &ctx->proc_cap, n + 16, sizeof *ctx->proc_buf)) {
        n = ctx->proc_cap;
        rc = ctx->fn.running_processes(h, &n, ctx->proc_buf);
    }
    d->processes_rc = rc;
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) { /* more than the scratch bound: count only */
        d->process_total = n;
        d->processes_truncated = 1;
        d->processes_rc = NVML_SUCCESS;
        return;
    }
    if (rc != NVML_SUCCESS)
        return;
    uint32_t have = n < ctx->proc_cap ? n : ctx->proc_cap; /* never trust n beyond the buffer */
    uint32_t keep = have < room ? have : room;
    d->process_total = n;
    d->processes_truncated = n > keep;
    d->process_count = keep;
    for (uint32_t k = 0; k < keep; k++) {
        const nvmlProcessInfo_t *p = &ctx->proc_buf[k];
        vnv_process_sample *r = &rows[k];
        r->pid = p->pid;
        r->used_memory = p->usedGpuMemory;
        r->gpu_instance_id = p->gpuInstanceId;
        r->compute_instance_id = p->computeInstanceId;
        r->sm_util = VNV_NO_SAMPLE;
        r->mem_util = VNV_NO_SAMPLE;
        r->util_timestamp = 0;
        r->reserved = 0;
    }
}

static void sample_process_util(vnv_ctx *ctx, uint32_t i, vnv_device_sample *d, vnv_process_sample *rows)
{
    if (!ctx->fn.process_utilization) {
        d->process_util_rc = NVML_ERROR_FUNCTION_NOT_FOUND;
        return;
    }
    nvmlDevice_t h = ctx->dev[i];
    unsigned int n = ctx->util_cap;
    nvmlReturn_t rc = ctx->fn.process_utilization(h, ctx->util_buf, &n, ctx->util_last_seen[i]);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE &&
        grow((void **)&ctx->util_buf, &ctx->util_cap, n + 16, sizeof *ctx->util_buf)) {
        n = ctx->util_cap;
        rc = ctx->fn.process_utilization(h, ctx->util_buf, &n, ctx->util_last_seen[i]);
    }
    d->process_util_rc = rc;
    if (rc != NVML_SUCCESS) {
        d->util_last_seen = ctx->util_last_seen[i];
        return;
    }
    uint32_t have = n < ctx->util_cap ? n : ctx->util_cap;
    uint64_t newest = ctx->util_last_seen[i];
    d->util_samples = have;
    for (uint32_t k = 0; k < have; k++) {
        const nvmlProcessUtilizationSample_t *s = &ctx->util_buf[k];
        if (s->timeStamp > newest)
            newest = s->timeStamp;
        for (uint32_t r = 0; r < d->process_count; r++) {
            /* Several samples per pid may come back: keep the newest. */
            if (rows[r].pid == s->pid && s->timeStamp >= rows[r].util_timestamp) {
                rows[r].sm_util = (int32_t)(s->smUtil > 100 ? 100 : s->smUtil);
                rows[r].mem_util = (int32_t)(s->memUtil > 100 ? 100 : s->memUtil);
                rows[r].util_timestamp = s->timeStamp;
            }
        }
    }
    ctx->util_last_seen[i] = newest;
    d->util_last_seen = newest;
}

int vnv_sample(vnv_ctx *ctx, vnv_device_sample *devs, uint32_t dev_cap,
               vnv_process_sample *procs, uint32_t procs_per_device)
{
    if (!ctx || !devs || (procs_per_device && !procs))
        return -1;
    if (!ctx->proc_buf && !grow((void **)&ctx->proc_buf, &ctx->proc_cap,
                                procs_per_device > 64 ? procs_per_device : 64, sizeof *ctx->proc_buf))
        return -1;
    if (!ctx->util_buf && !grow((void **)&ctx->util_buf, &ctx->util_cap,
                                procs_per_device > 64 ? procs_per_device : 64, sizeof *ctx->util_buf))
        return -1;
    uint32_t n = ctx->ndev < dev_cap ? ctx->ndev : dev_cap;
    for (uint32_t i = 0; i < n; i++) {
        vnv_device_sample *d = &devs[i];
        vnv_process_sample *rows = procs ? &procs[(size_t)i * procs_per_device] : NULL;
        memset(d, 0, sizeof *d);
        d->handle_rc = ctx->dev_rc[i];
        if (d->handle_rc != NVML_SUCCESS) {
            d->memory_rc = d->utilization_rc = d->processes_rc = d->process_util_rc = d->handle_rc;
            continue;
        }
        nvmlDevice_t h = ctx->dev[i];
        nvmlMemory_t mem;
        d->memory_rc = ctx->fn.memory_info(h, &mem);
        if (d->memory_rc == NVML_SUCCESS) {
            d->memory_total = mem.total;
            d->memory_used = mem.used;
            d->memory_free = mem.free;
        }
        nvmlUtilization_t util;
        d->utilization_rc = ctx->fn.utilization(h, &util);
        if (d->utilization_rc == NVML_SUCCESS) {
            d->utilization_gpu = util.gpu;
            d->utilization_memory = util.memory;
        }
        sample_processes(ctx, h, d, rows, procs_per_device);
        sample_process_util(ctx, i, d, rows);
    }
    return (int)n;
}

/* ------------------------------------------------------------------ device handles */

#define NEED(f)                                                                                  \
    do {                                                                                         \
        if (!ctx || !ctx->fn.f)                                                                  \
            return ctx ? NVML_ERROR_FUNCTION_NOT_FOUND : NVML_ERROR_INVALID_ARGUMENT;            \
    } while (0)
#define NONNULL(...)                                                                             \
    do {                                                                                         \
        const void *ptrs_[] = {__VA_ARGS__};                                                     \
        for (size_t k_ = 0; k_ < sizeof ptrs_ / sizeof ptrs_[0]; k_++)                           \
            if (!ptrs_[k_])                                                                      \
                return NVML_ERROR_INVALID_ARGUMENT;                                              \
    } while (0)
#define DEV(d) ((nvmlDevice_t)(d))
#define GI(g) ((nvmlGpuInstance_t)(g))
#define CI(c) ((nvmlComputeInstance_t)(c))

static int32_t index_of(const vnv_ctx *ctx, nvmlDevice_t h)
{
    for (uint32_t i = 0; i < ctx->ndev; i++)
        if (ctx->dev_rc[i] == NVML_SUCCESS && ctx->dev[i] == h)
            return (int32_t)i;
    return -1;
}

static void copy_name(char *dst, const char *src, size_t srclen)
{
    size_t n = strnlen(src, srclen);
    if (n >= VNV_NAME_LEN)
        n = VNV_NAME_LEN - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int vnv_device_handle(const vnv_ctx *ctx, uint32_t index, vnv_device_t *out)
{
    NONNULL(ctx, out);
    if (index >= ctx->ndev)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (ctx->dev_rc[index] != NVML_SUCCESS)
        return ctx->dev_rc[index];
    *out = (vnv_device_t)ctx->dev[index];
    return NVML_SUCCESS;
}

int vnv_device_handle_by_uuid(const vnv_ctx *ctx, const char *uuid, vnv_device_t *out)
{
    NEED(handle_by_uuid);
    NONNULL(uuid, out);
    nvmlDevice_t h = NULL;
    int rc = ctx->fn.handle_by_uuid(uuid, &h);
    if (rc == NVML_SUCCESS)
        *out = (vnv_device_t)h;
    return rc;
}

int vnv_device_uuid(const vnv_ctx *ctx, vnv_device_t dev, char *buf, uint32_t len)
{
    NEED(uuid);
    NONNULL(dev, buf);
    if (len == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    int rc = ctx->fn.uuid(DEV(dev), buf, len);
    buf[len - 1] = '\0';
    return rc;
}

/* ------------------------------------------------------------------ MIG */

int vnv_get_mig_mode(const vnv_ctx *ctx, vnv_device_t dev, uint32_t *current, uint32_t *pending)
{
    NEED(get_mig_mode);
    NONNULL(dev, current, pending);
    unsigned int c = 0, p = 0;
    int rc = ctx->fn.get_mig_mode(DEV(dev), &c, &p);
    *current = c;
    *pending = p;
    return rc;
}

int vnv_set_mig_mode(const vnv_ctx *ctx, vnv_device_t dev, uint32_t mode, int32_t *activation)
{
    NEED(set_mig_mode);
    NONNULL(dev, activation);
    nvmlReturn_t act = NVML_SUCCESS;
    int rc = ctx->fn.set_mig_mode(DEV(dev), mode, &act);
    *activation = act;
    return rc;
}

int vnv_gi_profile_info(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile, vnv_gi_profile *out)
{
    NONNULL(ctx, dev, out);
    memset(out, 0, sizeof *out);
    if (ctx->fn.gi_profile_info_v) {
        nvmlGpuInstanceProfileInfo_v2_t v;
        memset(&v, 0, sizeof v);
        v.version = nvmlGpuInstanceProfileInfo_v2;
        int rc = ctx->fn.gi_profile_info_v(DEV(dev), profile, &v);
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
    NEED(gi_profile_info);
    nvmlGpuInstanceProfileInfo_t v;
    memset(&v, 0, sizeof v);
    int rc = ctx->fn.gi_profile_info(DEV(dev), profile, &v);
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
    NEED(gi_placements);
    NONNULL(dev, count);
    nvmlGpuInstancePlacement_t buf[VNV_MAX_INSTANCES];
    unsigned int n = VNV_MAX_INSTANCES;
    *count = 0;
    int rc = ctx->fn.gi_placements(DEV(dev), profile_id, buf, &n);
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
    NEED(gi_create);
    NONNULL(dev, out);
    nvmlGpuInstance_t gi = NULL;
    int rc = ctx->fn.gi_create(DEV(dev), profile_id, &gi);
    if (rc == NVML_SUCCESS)
        *out = (vnv_gpu_instance_t)gi;
    return rc;
}

int vnv_gi_create_with_placement(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile_id,
                                 uint32_t start, uint32_t size, vnv_gpu_instance_t *out)
{
    NEED(gi_create_placed);
    NONNULL(dev, out);
    nvmlGpuInstancePlacement_t pl = {.start = start, .size = size};
    nvmlGpuInstance_t gi = NULL;
    int rc = ctx->fn.gi_create_placed(DEV(dev), profile_id, &pl, &gi);
    if (rc == NVML_SUCCESS)
        *out = (vnv_gpu_instance_t)gi;
    return rc;
}

int vnv_gi_list(const vnv_ctx *ctx, vnv_device_t dev, uint32_t profile_id,
                vnv_gpu_instance_t *out, uint32_t cap, uint32_t *count)
{
    NEED(gi_list);
    NONNULL(dev, count);
    /* NVML writes up to the profile's instanceCount entries without reading *count as a
     * bound, so it gets a buffer larger than any profile allows; we copy what fits. */
    nvmlGpuInstance_t buf[VNV_MAX_INSTANCES];
    unsigned int n = VNV_MAX_INSTANCES;
    *count = 0;
    int rc = ctx->fn.gi_list(DEV(dev), profile_id, buf, &n);
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
    NEED(gi_by_id);
    NONNULL(dev, out);
    nvmlGpuInstance_t gi = NULL;
    int rc = ctx->fn.gi_by_id(DEV(dev), id, &gi);
    if (rc == NVML_SUCCESS)
        *out = (vnv_gpu_instance_t)gi;
    return rc;
}

int vnv_gi_get_info(const vnv_ctx *ctx, vnv_gpu_instance_t gi, vnv_gi_info *out)
{
    NEED(gi_info);
    NONNULL(gi, out);
    nvmlGpuInstanceInfo_t info;
    memset(&info, 0, sizeof info);
    memset(out, 0, sizeof *out);
    int rc = ctx->fn.gi_info(GI(gi), &info);
    if (rc == NVML_SUCCESS) {
        out->device_index = index_of(ctx, info.device);
        out->id = info.id;
        out->profile_id = info.profileId;
        out->placement_start = info.placement.start;
        out->placement_size = info.placement.size;
    }
    return rc;
}

int vnv_gi_destroy(const vnv_ctx *ctx, vnv_gpu_instance_t gi)
{
    NEED(gi_destroy);
    NONNULL(gi);
    return ctx->fn.gi_destroy(GI(gi));
}

int vnv_ci_profile_info(const vnv_ctx *ctx, vnv_gpu_instance_t gi, uint32_t profile, uint32_t eng_profile,
                        vnv_ci_profile *out)
{
    NONNULL(ctx, gi, out);
    memset(out, 0, sizeof *out);
    if (ctx->fn.ci_profile_info_v) {
        nvmlComputeInstanceProfileInfo_v2_t v;
        memset(&v, 0, sizeof v);
        v.version = nvmlComputeInstanceProfileInfo_v2;
        int rc = ctx->fn.ci_profile_info_v(GI(gi), profile, eng_profile, &v);
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
    NEED(ci_profile_info);
    nvmlComputeInstanceProfileInfo_t v;
    memset(&v, 0, sizeof v);
    int rc = ctx->fn.ci_profile_info(GI(gi), profile, eng_profile, &v);
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
    NEED(ci_create);
    NONNULL(gi, out);
    nvmlComputeInstance_t ci = NULL;
    int rc = ctx->fn.ci_create(GI(gi), profile_id, &ci);
    if (rc == NVML_SUCCESS)
        *out = (vnv_compute_instance_t)ci;
    return rc;
}

int vnv_ci_list(const vnv_ctx *ctx, vnv_gpu_instance_t gi, uint32_t profile_id,
                vnv_compute_instance_t *out, uint32_t cap, uint32_t *count)
{
    NEED(ci_list);
    NONNULL(gi, count);
    nvmlComputeInstance_t buf[VNV_MAX_INSTANCES]; /* see vnv_gi_list */
    unsigned int n = VNV_MAX_INSTANCES;
    *count = 0;
    int rc = ctx->fn.ci_list(GI(gi), profile_id, buf, &n);
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
    NEED(ci_info);
    NONNULL(ci, out);
    nvmlComputeInstanceInfo_t info;
    memset(&info, 0, sizeof info);
    memset(out, 0, sizeof *out);
    int rc = ctx->fn.ci_info(CI(ci), &info);
    if (rc == NVML_SUCCESS) {
        out->device_index = index_of(ctx, info.device);
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
    NEED(ci_destroy);
    NONNULL(ci);
    return ctx->fn.ci_destroy(CI(ci));
}

int vnv_max_mig_device_count(const vnv_ctx *ctx, vnv_device_t dev, uint32_t *count)
{
    NEED(max_mig_devices);
    NONNULL(dev, count);
    unsigned int n = 0;
    int rc = ctx->fn.max_mig_devices(DEV(dev), &n);
    *count = n;
    return rc;
}

int vnv_mig_device_by_index(const vnv_ctx *ctx, vnv_device_t dev, uint32_t index, vnv_device_t *out)
{
    NEED(mig_by_index);
    NONNULL(dev, out);
    nvmlDevice_t m = NULL;
    int rc = ctx->fn.mig_by_index(DEV(dev), index, &m);
    if (rc == NVML_SUCCESS)
        *out = (vnv_device_t)m;
    return rc;
}

int vnv_is_mig_device(const vnv_ctx *ctx, vnv_device_t dev, uint32_t *is_mig)
{
    NEED(is_mig);
    NONNULL(dev, is_mig);
    unsigned int v = 0;
    int rc = ctx->fn.is_mig(DEV(dev), &v);
    *is_mig = v;
    return rc;
}

int vnv_mig_gpu_instance_id(const vnv_ctx *ctx, vnv_device_t mig, uint32_t *id)
{
    NEED(mig_gi_id);
    NONNULL(mig, id);
    unsigned int v = 0;
    int rc = ctx->fn.mig_gi_id(DEV(mig), &v);
    *id = v;
    return rc;
}

int vnv_mig_compute_instance_id(const vnv_ctx *ctx, vnv_device_t mig, uint32_t *id)
{
    NEED(mig_ci_id);
    NONNULL(mig, id);
    unsigned int v = 0;
    int rc = ctx->fn.mig_ci_id(DEV(mig), &v);
    *id = v;
    return rc;
}

int vnv_parent_of_mig_device(const vnv_ctx *ctx, vnv_device_t mig, vnv_device_t *out)
{
    NEED(mig_parent);
    NONNULL(mig, out);
    nvmlDevice_t p = NULL;
    int rc = ctx->fn.mig_parent(DEV(mig), &p);
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
static int read_cis(const vnv_ctx *ctx, const vnv_layout_query *q, nvmlGpuInstance_t gi, vnv_layout_ci *cis,
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
            vnv_layout_ci *c = &cis[st->n_ci++];
            c->handle = (vnv_compute_instance_t)buf[k];
            c->id = info.id;
            c->ci_profile = p;
        }
    }
    return NVML_SUCCESS;
}

int vnv_mig_read_layout(const vnv_ctx *ctx, vnv_device_t dev, const vnv_layout_query *queries, uint32_t nq,
                        vnv_layout_gi *gis, uint32_t gi_cap, vnv_layout_ci *cis, uint32_t ci_cap,
                        vnv_mig_status *status)
{
    NONNULL(ctx, dev, status);
    memset(status, 0, sizeof *status);
    if (nq && !queries)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((gi_cap && !gis) || (ci_cap && !cis))
        return NVML_ERROR_INVALID_ARGUMENT;
    for (uint32_t qi = 0; qi < nq; qi++) {
        const vnv_layout_query *q = &queries[qi];
        if (!ctx->fn.gi_list)
            return mig_fail(status, VNV_CALL_GI_LIST, q->gi_profile_id, NVML_ERROR_FUNCTION_NOT_FOUND);
        nvmlGpuInstance_t buf[VNV_MAX_INSTANCES]; /* see vnv_gi_list */
        unsigned int n = VNV_MAX_INSTANCES;
        int rc = ctx->fn.gi_list(DEV(dev), q->gi_profile_id, buf, &n);
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
            vnv_layout_gi *g = &gis[status->n_gi++];
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
    NONNULL(ctx, dev, status);
    memset(status, 0, sizeof *status);
    if (cap && !out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!ctx->fn.max_mig_devices)
        return mig_fail(status, VNV_CALL_MAX_MIG, 0, NVML_ERROR_FUNCTION_NOT_FOUND);
    unsigned int count = 0;
    int rc = ctx->fn.max_mig_devices(DEV(dev), &count);
    if (rc != NVML_SUCCESS)
        return mig_fail(status, VNV_CALL_MAX_MIG, 0, rc);
    for (uint32_t i = 0; i < count; i++) {
        if (!ctx->fn.mig_by_index)
            return mig_fail(status, VNV_CALL_MIG_BY_INDEX, i, NVML_ERROR_FUNCTION_NOT_FOUND);
        nvmlDevice_t m = NULL;
        rc = ctx->fn.mig_by_index(DEV(dev), i, &m);
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
