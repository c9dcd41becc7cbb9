/*
 * nvml_context.h - the ONE loaded NVML library: run-time loading, init/shutdown, the device table.
 *
 * NVML is never linked: vnv_open() dlopen()s the library by path and resolves each entry
 * point with dlsym().  All state lives in the opaque vnv_ctx returned by vnv_open(): the
 * library handle, the resolved function table, the device handles and the sampler's
 * scratch buffers.  There is no other global state.  The other NVML components
 * (nvml_sampler.h: the bulk sample, nvml_mig.h: the MIG calls) call through a context.
 * A context is not thread-safe for vnv_sample()/vnv_refresh(); the MIG calls only read it.
 *
 * Every function returns an nvmlReturn_t value (0 = NVML_SUCCESS).  An optional NVML
 * entry point that the library lacks yields NVML_ERROR_FUNCTION_NOT_FOUND (13).
 * This header deliberately does not include nvml_abi.h: Python (cffi) only sees the
 * vnv_* types.  The context's internals are in nvml_context_private.h.
 */
#ifndef VGPU_NVML_CONTEXT_H
#define VGPU_NVML_CONTEXT_H

#include <stdint.h>

#define VNV_MAX_DEVICES 256                 /* devices a context enumerates at most */
#define VNV_UUID_LEN 96                     /* NVML_DEVICE_UUID_V2_BUFFER_SIZE (80), rounded up */

typedef struct vnv_ctx vnv_ctx;
/* Opaque NVML handles, distinct types so a GI cannot be passed where a CI is expected. */
typedef struct vnv_device_s *vnv_device_t;
typedef struct vnv_gpu_instance_s *vnv_gpu_instance_t;
typedef struct vnv_compute_instance_s *vnv_compute_instance_t;

/* ---- lifecycle */
int vnv_open(const char *library_path, vnv_ctx **out, char *err, uint32_t errlen);
void vnv_close(vnv_ctx *ctx);
int vnv_refresh(vnv_ctx *ctx, char *err, uint32_t errlen);
uint32_t vnv_device_count(const vnv_ctx *ctx);
const char *vnv_error_string(const vnv_ctx *ctx, int rc);
uint32_t vnv_missing_symbols(const vnv_ctx *ctx, char *buf, uint32_t len);

/* ---- device handles */
int vnv_device_handle(const vnv_ctx *ctx, uint32_t index, vnv_device_t *out);
int vnv_device_handle_by_uuid(const vnv_ctx *ctx, const char *uuid, vnv_device_t *out);
int vnv_device_uuid(const vnv_ctx *ctx, vnv_device_t dev, char *buf, uint32_t len);

#endif /* VGPU_NVML_CONTEXT_H */
