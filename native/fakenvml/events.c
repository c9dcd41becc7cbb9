/* events.c - event sets: XID critical errors and double-bit ECC errors from the config.
 *
 * Each device's xid_events entry (and each ecc_dbe_events count) is delivered
 * once per process: g_fake.xid_delivered / ecc_delivered count what has been
 * handed out, so rewriting the file with the same entries delivers nothing new.
 * nvmlEventSetWait polls the files every few milliseconds while it blocks. */
#include "fakenvml.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define SUPPORTED_EVENTS                                                                                   \
    (nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypePState |             \
     nvmlEventTypeXidCriticalError | nvmlEventTypeClock)
#define WAIT_POLL_NS 5000000L /* 5 ms */

static struct nvmlEventSet_st *resolve_set(nvmlEventSet_t set)
{
    uintptr_t a = (uintptr_t)set, b = (uintptr_t)g_fake.sets;
    if (a < b || a >= b + sizeof(g_fake.sets) || (a - b) % sizeof(g_fake.sets[0]) != 0)
        return NULL;
    return set->used ? set : NULL;
}

static nvmlReturn_t set_create(nvmlEventSet_t *set)
{
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = fake_injected(FN_nvmlEventSetCreate, -1);
    if (rc)
        return rc;
    for (size_t i = 0; i < FAKE_MAX_EVENT_SETS; i++) {
        if (!g_fake.sets[i].used) {
            memset(&g_fake.sets[i], 0, sizeof(g_fake.sets[i]));
            g_fake.sets[i].used = 1;
            *set = &g_fake.sets[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_MEMORY;
}
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) { FAKE_LOCKED(set_create(set)); }

static nvmlReturn_t supported_types(nvmlDevice_t h, unsigned long long *types)
{
    if (!types)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = fake_resolve(h, 0, NVML_ERROR_NOT_SUPPORTED, &t);
    if (rc)
        return rc;
    if ((rc = fake_injected(FN_nvmlDeviceGetSupportedEventTypes, (int)t.dev)))
        return rc;
    *types = SUPPORTED_EVENTS;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t h, unsigned long long *types)
{
    FAKE_LOCKED(supported_types(h, types));
}

static nvmlReturn_t register_events(nvmlDevice_t h, unsigned long long types, nvmlEventSet_t set)
{
    struct fake_target t;
    nvmlReturn_t rc = fake_resolve(h, 0, NVML_ERROR_NOT_SUPPORTED, &t);
    if (rc)
        return rc;
    struct nvmlEventSet_st *s = resolve_set(set);
    if (!s)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((rc = fake_injected(FN_nvmlDeviceRegisterEvents, (int)t.dev)))
        return rc;
    if (types & ~SUPPORTED_EVENTS)
        return NVML_ERROR_NOT_SUPPORTED;
    s->mask[t.dev] |= types;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t h, unsigned long long types, nvmlEventSet_t set)
{
    FAKE_LOCKED(register_events(h, types, set));
}

/* Hand out the next pending event for this set, if any (lock held). */
static int next_event(struct nvmlEventSet_st *s, nvmlEventData_t *data)
{
    for (size_t i = 0; i < g_fake.cfg.ndevices; i++) {
        const struct fake_device *d = &g_fake.cfg.devices[i];
        if ((s->mask[i] & nvmlEventTypeXidCriticalError) && g_fake.xid_delivered[i] < d->nxids) {
            const struct fake_xid *x = &d->xids[g_fake.xid_delivered[i]++];
            data->device = &g_phys[i];
            data->eventType = nvmlEventTypeXidCriticalError;
            data->eventData = x->xid;
            data->gpuInstanceId = x->gi;
            data->computeInstanceId = x->ci;
            return 1;
        }
        if ((s->mask[i] & nvmlEventTypeDoubleBitEccError) && g_fake.ecc_delivered[i] < d->ecc_dbe_events) {
            g_fake.ecc_delivered[i]++;
            data->device = &g_phys[i];
            data->eventType = nvmlEventTypeDoubleBitEccError;
            data->eventData = 0;
            data->gpuInstanceId = NVML_GPU_INSTANCE_ID_ANY;
            data->computeInstanceId = NVML_COMPUTE_INSTANCE_ID_ANY;
            return 1;
        }
    }
    return 0;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static nvmlReturn_t event_wait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms)
{
    if (!data)
        return NVML_ERROR_INVALID_ARGUMENT;
    long long deadline = now_ns() + (long long)timeout_ms * 1000000LL;
    for (;;) {
        nvmlReturn_t rc = fake_enter(); /* also picks up file changes */
        if (rc)
            return rc;
        struct nvmlEventSet_st *s = resolve_set(set);
        if (!s)
            rc = NVML_ERROR_INVALID_ARGUMENT;
        else if (!(rc = fake_injected(FN_nvmlEventSetWait, -1)) && !next_event(s, data))
            rc = NVML_ERROR_TIMEOUT;
        fake_leave();
        if (rc != NVML_ERROR_TIMEOUT)
            return rc;
        long long left = deadline - now_ns();
        if (left <= 0)
            return NVML_ERROR_TIMEOUT;
        struct timespec ts = {0, left < WAIT_POLL_NS ? (long)left : WAIT_POLL_NS};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
}
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    return event_wait(set, data, timeoutms);
}
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    return event_wait(set, data, timeoutms);
}

static nvmlReturn_t set_free(nvmlEventSet_t set)
{
    struct nvmlEventSet_st *s = resolve_set(set);
    if (!s)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = fake_injected(FN_nvmlEventSetFree, -1);
    if (rc)
        return rc;
    s->used = 0;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) { FAKE_LOCKED(set_free(set)); }
