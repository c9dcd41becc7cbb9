/*
 * nvml_sampler.c - see nvml_sampler.h: the bulk sample of every device of a context.
 */
#define _GNU_SOURCE
#include "nvml_sampler.h"

#include <stdlib.h>
#include <string.h>

#include "nvml_context_private.h"

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
    struct vnv_scratch *sc = &ctx->scratch;
    unsigned int n = sc->proc_cap;
    nvmlReturn_t rc = ctx->fn.running_processes(h, &n, sc->proc_buf);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE &&
        grow((void **)&sc->proc_buf, &sc->proc_cap, n + 16, sizeof *sc->proc_buf)) {
        n = sc->proc_cap;
        rc = ctx->fn.running_processes(h, &n, sc->proc_buf);
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
    uint32_t have = n < sc->proc_cap ? n : sc->proc_cap; /* never trust n beyond the buffer */
    uint32_t keep = have < room ? have : room;
    d->process_total = n;
    d->processes_truncated = n > keep;
    d->process_count = keep;
    for (uint32_t k = 0; k < keep; k++) {
        const nvmlProcessInfo_t *p = &sc->proc_buf[k];
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
    struct vnv_scratch *sc = &ctx->scratch;
    nvmlDevice_t h = ctx->dev[i];
    unsigned int n = sc->util_cap;
    nvmlReturn_t rc = ctx->fn.process_utilization(h, sc->util_buf, &n, ctx->util_last_seen[i]);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE &&
        grow((void **)&sc->util_buf, &sc->util_cap, n + 16, sizeof *sc->util_buf)) {
        n = sc->util_cap;
        rc = ctx->fn.process_utilization(h, sc->util_buf, &n, ctx->util_last_seen[i]);
    }
    d->process_util_rc = rc;
    if (rc != NVML_SUCCESS) {
        d->util_last_seen = ctx->util_last_seen[i];
        return;
    }
    uint32_t have = n < sc->util_cap ? n : sc->util_cap;
    uint64_t newest = ctx->util_last_seen[i];
    d->util_samples = have;
    for (uint32_t k = 0; k < have; k++) {
        const nvmlProcessUtilizationSample_t *s = &sc->util_buf[k];
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
    struct vnv_scratch *sc = &ctx->scratch;
    if (!sc->proc_buf && !grow((void **)&sc->proc_buf, &sc->proc_cap,
                               procs_per_device > 64 ? procs_per_device : 64, sizeof *sc->proc_buf))
        return -1;
    if (!sc->util_buf && !grow((void **)&sc->util_buf, &sc->util_cap,
                               procs_per_device > 64 ? procs_per_device : 64, sizeof *sc->util_buf))
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
