/*
 * nvml_context.c - see nvml_context.h: dlopen/dlsym of the NVML library, init/shutdown,
 * the device table and the device-handle lookups.
 */
#define _GNU_SOURCE
#include "nvml_context.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_context_private.h"

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
    free(ctx->scratch.proc_buf);
    free(ctx->scratch.util_buf);
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

/* ------------------------------------------------------------------ device handles */

int32_t vnv_index_of(const vnv_ctx *ctx, nvmlDevice_t h)
{
    for (uint32_t i = 0; i < ctx->ndev; i++)
        if (ctx->dev_rc[i] == NVML_SUCCESS && ctx->dev[i] == h)
            return (int32_t)i;
    return -1;
}

int vnv_device_handle(const vnv_ctx *ctx, uint32_t index, vnv_device_t *out)
{
    VNV_NONNULL(ctx, out);
    if (index >= ctx->ndev)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (ctx->dev_rc[index] != NVML_SUCCESS)
        return ctx->dev_rc[index];
    *out = (vnv_device_t)ctx->dev[index];
    return NVML_SUCCESS;
}

int vnv_device_handle_by_uuid(const vnv_ctx *ctx, const char *uuid, vnv_device_t *out)
{
    VNV_NEED(handle_by_uuid);
    VNV_NONNULL(uuid, out);
    nvmlDevice_t h = NULL;
    int rc = ctx->fn.handle_by_uuid(uuid, &h);
    if (rc == NVML_SUCCESS)
        *out = (vnv_device_t)h;
    return rc;
}

int vnv_device_uuid(const vnv_ctx *ctx, vnv_device_t dev, char *buf, uint32_t len)
{
    VNV_NEED(uuid);
    VNV_NONNULL(dev, buf);
    if (len == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    int rc = ctx->fn.uuid(VNV_DEV(dev), buf, len);
    buf[len - 1] = '\0';
    return rc;
}
