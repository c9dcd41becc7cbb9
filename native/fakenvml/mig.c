/* mig.c - MIG mode, GPU instances, compute instances and MIG device handles.
 *
 * Reads use the cached state (g_fake.mig, refreshed when the file changes).
 * Every change is a locked read-modify-write of the state file (mutate()), so
 * two processes never lose each other's instances.
 *
 * Placement rules: a GI profile's placements are the memory-slice starts of
 * profiles.c; a new GI must not overlap the memory slices of an existing one,
 * must stay within the profile's instanceCount and the GPU's compute slices.
 * CIs inside a GI: placements start at multiples of the CI's slice count. */
#include "fakenvml.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ lookups */

static struct mig_dev_state *state_dev(struct mig_state *s, unsigned dev, int create)
{
    if (!s || dev >= g_fake.cfg.ndevices)
        return NULL;
    return mig_state_find(s, g_fake.cfg.devices[dev].uuid, create);
}

static int mode_in(struct mig_state *s, unsigned dev)
{
    const struct fake_device *d = &g_fake.cfg.devices[dev];
    if (!d->mig_capable)
        return 0;
    const struct mig_dev_state *ds = state_dev(s, dev, 0);
    return ds && ds->has_mode ? ds->mode : d->mig_mode;
}

int fake_mig_enabled(unsigned dev)
{
    return dev < g_fake.cfg.ndevices && mode_in(g_fake.mig, dev);
}

const struct mig_dev_state *fake_mig_dev(unsigned dev)
{
    if (!fake_mig_enabled(dev))
        return NULL;
    return state_dev(g_fake.mig, dev, 0);
}

const struct mig_gi_state *fake_find_gi(const struct mig_dev_state *ds, unsigned gi_id)
{
    for (unsigned i = 0; ds && i < ds->ngi; i++)
        if (ds->gi[i].id == gi_id)
            return &ds->gi[i];
    return NULL;
}

const struct mig_ci_state *fake_find_ci(const struct mig_gi_state *gi, unsigned ci_id)
{
    for (unsigned i = 0; gi && i < gi->nci; i++)
        if (gi->ci[i].id == ci_id)
            return &gi->ci[i];
    return NULL;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* A stable "MIG-<uuid>" (R470+ format) derived from the parent UUID and the ids. */
void fake_mig_uuid(const char *parent_uuid, unsigned gi, unsigned ci, char *out, size_t outlen)
{
    unsigned ids[2] = {gi, ci};
    uint64_t a = fnv1a(0xcbf29ce484222325ULL, parent_uuid, strlen(parent_uuid));
    a = fnv1a(a, ids, sizeof(ids));
    uint64_t b = fnv1a(a ^ 0x9e3779b97f4a7c15ULL, ids, sizeof(ids));
    b = fnv1a(b, parent_uuid, strlen(parent_uuid));
    snprintf(out, outlen, "MIG-%08x-%04x-5%03x-%04x-%012llx", (unsigned)(a >> 32), (unsigned)(a >> 16) & 0xFFFF,
             (unsigned)a & 0xFFF, (unsigned)(0x8000 | ((b >> 48) & 0x3FFF)),
             (unsigned long long)(b & 0xFFFFFFFFFFFFULL));
}

/* Physical, MIG-capable device handle. */
static nvmlReturn_t resolve_capable(nvmlDevice_t h, enum fake_fn fn, struct fake_target *t)
{
    nvmlReturn_t rc = fake_resolve(h, 0, NVML_ERROR_INVALID_ARGUMENT, t);
    if (rc)
        return rc;
    if ((rc = fake_injected(fn, (int)t->dev)))
        return rc;
    if (!t->d->mig_capable || !t->d->model)
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

static int gi_slot(nvmlGpuInstance_t h, unsigned *dev, unsigned *gi)
{
    uintptr_t a = (uintptr_t)h, b = (uintptr_t)g_gi;
    if (a < b || a >= b + sizeof(g_gi))
        return 0;
    *dev = (unsigned)((a - b) / MIG_MAX_GI_ID);
    *gi = (unsigned)((a - b) % MIG_MAX_GI_ID);
    return 1;
}

static int ci_slot(nvmlComputeInstance_t h, unsigned *dev, unsigned *gi, unsigned *ci)
{
    uintptr_t a = (uintptr_t)h, b = (uintptr_t)g_ci;
    if (a < b || a >= b + sizeof(g_ci))
        return 0;
    size_t idx = a - b;
    *dev = (unsigned)(idx / (MIG_MAX_GI_ID * MIG_MAX_CI));
    *gi = (unsigned)(idx / MIG_MAX_CI % MIG_MAX_GI_ID);
    *ci = (unsigned)(idx % MIG_MAX_CI);
    return 1;
}

struct gi_target {
    unsigned dev;
    const struct fake_device *d;
    const struct mig_gi_state *gi;
    const struct mig_gi_profile *profile;
};

static nvmlReturn_t resolve_gi(nvmlGpuInstance_t h, enum fake_fn fn, struct gi_target *t)
{
    unsigned dev, gi;
    if (!gi_slot(h, &dev, &gi) || dev >= g_fake.cfg.ndevices)
        return NVML_ERROR_INVALID_ARGUMENT;
    t->dev = dev;
    t->d = &g_fake.cfg.devices[dev];
    t->gi = fake_find_gi(fake_mig_dev(dev), gi);
    if (!t->gi)
        return NVML_ERROR_INVALID_ARGUMENT; /* destroyed, or MIG turned off */
    t->profile = mig_profile_by_id(t->d->model, t->gi->profile_id);
    if (!t->profile)
        return NVML_ERROR_INVALID_ARGUMENT;
    return fake_injected(fn, (int)dev);
}

/* ------------------------------------------------------------------ state changes */

typedef nvmlReturn_t (*mutator_fn)(struct mig_state *s, unsigned dev, void *arg);

/* Locked read-modify-write of the state file; the cache becomes the fresh state. */
static nvmlReturn_t mutate(unsigned dev, mutator_fn fn, void *arg)
{
    char err[512];
    int lock = mig_state_lock(g_fake.state_path, 1, err, sizeof(err));
    if (lock < 0) {
        fake_log("%s", err);
        return NVML_ERROR_UNKNOWN;
    }
    struct mig_state *fresh = malloc(sizeof(*fresh));
    if (!fresh) {
        mig_state_unlock(lock);
        return NVML_ERROR_MEMORY;
    }
    nvmlReturn_t rc;
    if (mig_state_load(g_fake.state_path, fresh, err, sizeof(err)) != 0) {
        fake_log("%s: %s (MIG state file; delete it to reset MIG state)", g_fake.state_path, err);
        free(fresh);
        mig_state_unlock(lock);
        return NVML_ERROR_UNKNOWN;
    }
    rc = fn(fresh, dev, arg);
    if (rc == NVML_SUCCESS && mig_state_save(g_fake.state_path, fresh, err, sizeof(err)) != 0) {
        fake_log("%s", err);
        rc = NVML_ERROR_UNKNOWN;
        /* keep the cache as it was on disk */
        mig_state_load(g_fake.state_path, fresh, err, sizeof(err));
    }
    free(g_fake.mig);
    g_fake.mig = fresh;
    /* Still under the file lock: this is exactly the version now cached. */
    g_fake.state_seen = fake_file_id(g_fake.state_path);
    mig_state_unlock(lock);
    return rc;
}

static int has_whole_gpu_process(const struct fake_device *d)
{
    for (size_t i = 0; i < d->nprocesses; i++)
        if (d->processes[i].gi == FAKE_NO_INSTANCE)
            return 1;
    return 0;
}

static unsigned gi_slices_used(const struct mig_dev_state *ds, const struct mig_model *m)
{
    unsigned used = 0;
    for (unsigned i = 0; ds && i < ds->ngi; i++) {
        const struct mig_gi_profile *p = mig_profile_by_id(m, ds->gi[i].profile_id);
        used += p ? p->slices : 0;
    }
    return used;
}

static int mem_overlaps(const struct mig_dev_state *ds, unsigned start, unsigned size)
{
    for (unsigned i = 0; ds && i < ds->ngi; i++)
        if (start < ds->gi[i].start + ds->gi[i].size && ds->gi[i].start < start + size)
            return 1;
    return 0;
}

static unsigned count_profile(const struct mig_dev_state *ds, unsigned profile_id)
{
    unsigned n = 0;
    for (unsigned i = 0; ds && i < ds->ngi; i++)
        n += ds->gi[i].profile_id == profile_id;
    return n;
}

struct mode_arg {
    unsigned mode;
};

static nvmlReturn_t do_set_mode(struct mig_state *s, unsigned dev, void *arg)
{
    const struct mode_arg *a = arg;
    const struct fake_device *d = &g_fake.cfg.devices[dev];
    if ((unsigned)mode_in(s, dev) == a->mode)
        return NVML_SUCCESS;
    if (d->nprocesses > 0)
        return NVML_ERROR_IN_USE; /* the GPU is not idle */
    struct mig_dev_state *ds = state_dev(s, dev, 1);
    if (!ds)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    if (a->mode == NVML_DEVICE_MIG_DISABLE && ds->ngi > 0)
        return NVML_ERROR_IN_USE; /* destroy the GPU instances first */
    ds->has_mode = 1;
    ds->mode = (int)a->mode;
    return NVML_SUCCESS;
}

/* Check a GI creation against ds; *start is the chosen placement (in/out when explicit). */
static nvmlReturn_t check_gi(const struct mig_dev_state *ds, const struct mig_model *m,
                             const struct mig_gi_profile *p, int explicit_placement, unsigned *start)
{
    if (explicit_placement) {
        int valid = 0;
        for (unsigned i = 0; i < p->nplacements; i++)
            valid |= p->starts[i] == *start;
        if (!valid)
            return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (count_profile(ds, p->id) >= p->instances || (ds && ds->ngi >= MIG_MAX_GI) ||
        gi_slices_used(ds, m) + p->slices > m->compute_slices)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    if (explicit_placement)
        return mem_overlaps(ds, *start, p->mem_slices) ? NVML_ERROR_INSUFFICIENT_RESOURCES : NVML_SUCCESS;
    for (unsigned i = 0; i < p->nplacements; i++) {
        if (!mem_overlaps(ds, p->starts[i], p->mem_slices)) {
            *start = p->starts[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

struct gi_create_arg {
    const struct mig_gi_profile *profile;
    int explicit_placement;
    unsigned start;
    unsigned id; /* out */
};

static nvmlReturn_t do_create_gi(struct mig_state *s, unsigned dev, void *arg)
{
    struct gi_create_arg *a = arg;
    const struct fake_device *d = &g_fake.cfg.devices[dev];
    if (!mode_in(s, dev))
        return NVML_ERROR_NOT_SUPPORTED;
    struct mig_dev_state *ds = state_dev(s, dev, 1);
    if (!ds)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    nvmlReturn_t rc = check_gi(ds, d->model, a->profile, a->explicit_placement, &a->start);
    if (rc)
        return rc;
    unsigned id = 1;
    while (id < MIG_MAX_GI_ID && fake_find_gi(ds, id))
        id++;
    if (id >= MIG_MAX_GI_ID)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    struct mig_gi_state *g = &ds->gi[ds->ngi++];
    memset(g, 0, sizeof(*g));
    g->id = id;
    g->profile_id = a->profile->id;
    g->start = a->start;
    g->size = a->profile->mem_slices;
    a->id = id;
    return NVML_SUCCESS;
}

struct instance_arg {
    unsigned gi, ci;
};

static nvmlReturn_t do_destroy_gi(struct mig_state *s, unsigned dev, void *arg)
{
    const struct instance_arg *a = arg;
    const struct fake_device *d = &g_fake.cfg.devices[dev];
    struct mig_dev_state *ds = mode_in(s, dev) ? state_dev(s, dev, 0) : NULL;
    const struct mig_gi_state *g = fake_find_gi(ds, a->gi);
    if (!g)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g->nci > 0 || has_whole_gpu_process(d))
        return NVML_ERROR_IN_USE;
    for (size_t i = 0; i < d->nprocesses; i++)
        if (d->processes[i].gi == a->gi)
            return NVML_ERROR_IN_USE;
    unsigned idx = (unsigned)(g - ds->gi);
    memmove(&ds->gi[idx], &ds->gi[idx + 1], (ds->ngi - idx - 1) * sizeof(ds->gi[0]));
    ds->ngi--;
    return NVML_SUCCESS;
}

/* Compute-instance placement starts inside a GI of gi_slices for CIs of ci_slices. */
static unsigned ci_placements(unsigned gi_slices, unsigned ci_slices, unsigned *starts, unsigned max)
{
    unsigned n = 0;
    for (unsigned s = 0; ci_slices && s + ci_slices <= gi_slices && n < max; s += ci_slices)
        starts[n++] = s;
    return n;
}

static nvmlReturn_t check_ci(const struct mig_gi_state *g, unsigned gi_slices, unsigned ci_profile,
                             int explicit_placement, unsigned *start)
{
    unsigned slices = mig_ci_slices(ci_profile);
    if (!mig_ci_allowed(gi_slices, slices))
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned starts[8];
    unsigned n = ci_placements(gi_slices, slices, starts, 8);
    if (explicit_placement) {
        int valid = 0;
        for (unsigned i = 0; i < n; i++)
            valid |= starts[i] == *start;
        if (!valid)
            return NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned used = 0, same = 0;
    for (unsigned i = 0; i < g->nci; i++) {
        used += g->ci[i].size;
        same += g->ci[i].profile_id == ci_profile;
    }
    if (same >= gi_slices / slices || used + slices > gi_slices || g->nci >= MIG_MAX_CI)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    for (unsigned i = 0; i < n; i++) {
        unsigned s = explicit_placement ? *start : starts[i];
        int overlap = 0;
        for (unsigned k = 0; k < g->nci; k++)
            overlap |= s < g->ci[k].start + g->ci[k].size && g->ci[k].start < s + slices;
        if (!overlap) {
            *start = s;
            return NVML_SUCCESS;
        }
        if (explicit_placement)
            break;
    }
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

struct ci_create_arg {
    unsigned gi;
    unsigned gi_slices;
    unsigned profile;
    int explicit_placement;
    unsigned start;
    unsigned id; /* out */
};

static nvmlReturn_t do_create_ci(struct mig_state *s, unsigned dev, void *arg)
{
    struct ci_create_arg *a = arg;
    struct mig_dev_state *ds = mode_in(s, dev) ? state_dev(s, dev, 0) : NULL;
    struct mig_gi_state *g = (struct mig_gi_state *)fake_find_gi(ds, a->gi);
    if (!g)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = check_ci(g, a->gi_slices, a->profile, a->explicit_placement, &a->start);
    if (rc)
        return rc;
    unsigned id = 0;
    while (id < MIG_MAX_CI && fake_find_ci(g, id))
        id++;
    if (id >= MIG_MAX_CI)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    struct mig_ci_state *c = &g->ci[g->nci++];
    c->id = id;
    c->profile_id = a->profile;
    c->start = a->start;
    c->size = mig_ci_slices(a->profile);
    a->id = id;
    return NVML_SUCCESS;
}

static nvmlReturn_t do_destroy_ci(struct mig_state *s, unsigned dev, void *arg)
{
    const struct instance_arg *a = arg;
    const struct fake_device *d = &g_fake.cfg.devices[dev];
    struct mig_dev_state *ds = mode_in(s, dev) ? state_dev(s, dev, 0) : NULL;
    struct mig_gi_state *g = (struct mig_gi_state *)fake_find_gi(ds, a->gi);
    const struct mig_ci_state *c = fake_find_ci(g, a->ci);
    if (!c)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (has_whole_gpu_process(d))
        return NVML_ERROR_IN_USE;
    for (size_t i = 0; i < d->nprocesses; i++)
        if (d->processes[i].gi == a->gi && d->processes[i].ci == a->ci)
            return NVML_ERROR_IN_USE;
    unsigned idx = (unsigned)(c - g->ci);
    memmove(&g->ci[idx], &g->ci[idx + 1], (g->nci - idx - 1) * sizeof(g->ci[0]));
    g->nci--;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------ MIG mode */

static nvmlReturn_t set_mig_mode(nvmlDevice_t h, unsigned int mode, nvmlReturn_t *activation)
{
    if (!activation)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = resolve_capable(h, FN_nvmlDeviceSetMigMode, &t);
    if (rc)
        return rc;
    if (mode != NVML_DEVICE_MIG_DISABLE && mode != NVML_DEVICE_MIG_ENABLE)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct mode_arg a = {mode};
    rc = mutate(t.dev, do_set_mode, &a);
    *activation = rc;
    return rc;
}
nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t h, unsigned int mode, nvmlReturn_t *activation)
{
    FAKE_LOCKED(set_mig_mode(h, mode, activation));
}

static nvmlReturn_t get_mig_mode(nvmlDevice_t h, unsigned int *current, unsigned int *pending)
{
    if (!current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = resolve_capable(h, FN_nvmlDeviceGetMigMode, &t);
    if (rc)
        return rc;
    *current = *pending = (unsigned)fake_mig_enabled(t.dev);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t h, unsigned int *c, unsigned int *p)
{
    FAKE_LOCKED(get_mig_mode(h, c, p));
}

/* ------------------------------------------------------------------ GI profiles */

/* fields common to every profile-info version */
#define FILL_GI_INFO(info, p)                         \
    do {                                              \
        (info)->id = (p)->id;                         \
        (info)->sliceCount = (p)->slices;             \
        (info)->instanceCount = (p)->instances;       \
        (info)->multiprocessorCount = (p)->sm;        \
        (info)->copyEngineCount = (p)->copy_engines;  \
        (info)->decoderCount = (p)->decoders;         \
        (info)->encoderCount = (p)->encoders;         \
        (info)->jpegCount = (p)->jpegs;               \
        (info)->ofaCount = (p)->ofas;                 \
        (info)->memorySizeMB = (p)->memory_mib;       \
    } while (0)

static nvmlReturn_t gi_profile_lookup(nvmlDevice_t h, unsigned profile, int by_id, struct fake_target *t,
                                      const struct mig_gi_profile **p)
{
    nvmlReturn_t rc = resolve_capable(h, FN_nvmlDeviceGetGpuInstanceProfileInfo, t);
    if (rc)
        return rc;
    if (by_id) {
        *p = mig_profile_by_id(t->d->model, profile);
        return *p ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
    }
    if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    *p = mig_profile_by_constant(t->d->model, profile);
    return *p ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

static nvmlReturn_t gi_profile_info(nvmlDevice_t h, unsigned profile, nvmlGpuInstanceProfileInfo_t *info)
{
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    const struct mig_gi_profile *p;
    nvmlReturn_t rc = gi_profile_lookup(h, profile, 0, &t, &p);
    if (rc)
        return rc;
    memset(info, 0, sizeof(*info));
    FILL_GI_INFO(info, p);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t h, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info)
{
    FAKE_LOCKED(gi_profile_info(h, profile, info));
}

static nvmlReturn_t gi_profile_info_v(nvmlDevice_t h, unsigned profile, int by_id, nvmlGpuInstanceProfileInfo_v2_t *info)
{
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned version = info->version;
    if (version != nvmlGpuInstanceProfileInfo_v2 && version != nvmlGpuInstanceProfileInfo_v3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    struct fake_target t;
    const struct mig_gi_profile *p;
    nvmlReturn_t rc = gi_profile_lookup(h, profile, by_id, &t, &p);
    if (rc)
        return rc;
    if (version == nvmlGpuInstanceProfileInfo_v2) {
        memset(info, 0, sizeof(*info));
        info->version = version;
        FILL_GI_INFO(info, p);
        snprintf(info->name, sizeof(info->name), "MIG %s", p->name);
    } else {
        nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)info;
        memset(v3, 0, sizeof(*v3));
        v3->version = version;
        FILL_GI_INFO(v3, p);
        snprintf(v3->name, sizeof(v3->name), "MIG %s", p->name);
        v3->capabilities = 0;
    }
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t h, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info)
{
    FAKE_LOCKED(gi_profile_info_v(h, profile, 0, info));
}
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(nvmlDevice_t h, unsigned int profile_id,
                                                      nvmlGpuInstanceProfileInfo_v2_t *info)
{
    FAKE_LOCKED(gi_profile_info_v(h, profile_id, 1, info));
}

static nvmlReturn_t gi_possible_placements(nvmlDevice_t h, unsigned profile_id, nvmlGpuInstancePlacement_t *out,
                                           unsigned int *count)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = resolve_capable(h, FN_nvmlDeviceGetGpuInstancePossiblePlacements, &t);
    if (rc)
        return rc;
    const struct mig_gi_profile *p = mig_profile_by_id(t.d->model, profile_id);
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!out) {
        *count = p->nplacements;
        return NVML_SUCCESS;
    }
    if (*count < p->nplacements) {
        *count = p->nplacements;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < p->nplacements; i++) {
        out[i].start = p->starts[i];
        out[i].size = p->mem_slices;
    }
    *count = p->nplacements;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t h, unsigned int profile_id,
                                                           nvmlGpuInstancePlacement_t *placements,
                                                           unsigned int *count)
{
    FAKE_LOCKED(gi_possible_placements(h, profile_id, placements, count));
}

static nvmlReturn_t gi_remaining(nvmlDevice_t h, unsigned profile_id, unsigned int *count)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = resolve_capable(h, FN_nvmlDeviceGetGpuInstanceRemainingCapacity, &t);
    if (rc)
        return rc;
    const struct mig_gi_profile *p = mig_profile_by_id(t.d->model, profile_id);
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!fake_mig_enabled(t.dev))
        return NVML_ERROR_NOT_SUPPORTED;
    /* Simulate creating instances (first free placement) until none fits. */
    struct mig_dev_state sim;
    const struct mig_dev_state *ds = fake_mig_dev(t.dev);
    if (ds)
        sim = *ds;
    else
        memset(&sim, 0, sizeof(sim));
    unsigned n = 0, start;
    while (sim.ngi < MIG_MAX_GI && check_gi(&sim, t.d->model, p, 0, &start) == NVML_SUCCESS) {
        struct mig_gi_state *g = &sim.gi[sim.ngi++];
        memset(g, 0, sizeof(*g));
        g->id = MIG_MAX_GI_ID; /* placeholder, never looked up */
        g->profile_id = p->id;
        g->start = start;
        g->size = p->mem_slices;
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t h, unsigned int profile_id, unsigned int *count)
{
    FAKE_LOCKED(gi_remaining(h, profile_id, count));
}

/* ------------------------------------------------------------------ GI lifecycle */

static nvmlReturn_t create_gi(nvmlDevice_t h, unsigned profile_id, const nvmlGpuInstancePlacement_t *placement,
                              int explicit_placement, nvmlGpuInstance_t *out)
{
    if (!out || (explicit_placement && !placement))
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = resolve_capable(
        h, explicit_placement ? FN_nvmlDeviceCreateGpuInstanceWithPlacement : FN_nvmlDeviceCreateGpuInstance, &t);
    if (rc)
        return rc;
    const struct mig_gi_profile *p = mig_profile_by_id(t.d->model, profile_id);
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!fake_mig_enabled(t.dev))
        return NVML_ERROR_NOT_SUPPORTED;
    struct gi_create_arg a = {.profile = p, .explicit_placement = explicit_placement};
    if (explicit_placement) {
        if (placement->size != p->mem_slices)
            return NVML_ERROR_INVALID_ARGUMENT;
        a.start = placement->start;
    }
    rc = mutate(t.dev, do_create_gi, &a);
    if (rc == NVML_SUCCESS)
        *out = &g_gi[t.dev][a.id];
    return rc;
}
nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t h, unsigned int profile_id, nvmlGpuInstance_t *gi)
{
    FAKE_LOCKED(create_gi(h, profile_id, NULL, 0, gi));
}
nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t h, unsigned int profile_id,
                                                      const nvmlGpuInstancePlacement_t *placement,
                                                      nvmlGpuInstance_t *gi)
{
    FAKE_LOCKED(create_gi(h, profile_id, placement, 1, gi));
}

static nvmlReturn_t destroy_gi(nvmlGpuInstance_t h)
{
    struct gi_target t;
    nvmlReturn_t rc = resolve_gi(h, FN_nvmlGpuInstanceDestroy, &t);
    if (rc)
        return rc;
    struct instance_arg a = {t.gi->id, 0};
    return mutate(t.dev, do_destroy_gi, &a);
}
nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gi) { FAKE_LOCKED(destroy_gi(gi)); }

/* Indices of ds->gi sorted by GI id. */
static unsigned sorted_gis(const struct mig_dev_state *ds, unsigned *order)
{
    unsigned n = 0;
    for (unsigned id = 0; ds && id < MIG_MAX_GI_ID; id++)
        for (unsigned i = 0; i < ds->ngi; i++)
            if (ds->gi[i].id == id)
                order[n++] = i;
    return n;
}

static nvmlReturn_t get_gis(nvmlDevice_t h, unsigned profile_id, nvmlGpuInstance_t *gis, unsigned int *count)
{
    if (!gis || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = resolve_capable(h, FN_nvmlDeviceGetGpuInstances, &t);
    if (rc)
        return rc;
    const struct mig_gi_profile *p = mig_profile_by_id(t.d->model, profile_id);
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!fake_mig_enabled(t.dev))
        return NVML_ERROR_NOT_SUPPORTED;
    const struct mig_dev_state *ds = fake_mig_dev(t.dev);
    unsigned order[MIG_MAX_GI], n = sorted_gis(ds, order), k = 0;
    /* NVML's contract: the array holds the profile's instanceCount entries. */
    for (unsigned i = 0; i < n && k < p->instances; i++)
        if (ds->gi[order[i]].profile_id == profile_id)
            gis[k++] = &g_gi[t.dev][ds->gi[order[i]].id];
    *count = k;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t h, unsigned int profile_id, nvmlGpuInstance_t *gis,
                                       unsigned int *count)
{
    FAKE_LOCKED(get_gis(h, profile_id, gis, count));
}

static nvmlReturn_t gi_by_id(nvmlDevice_t h, unsigned id, nvmlGpuInstance_t *out)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = resolve_capable(h, FN_nvmlDeviceGetGpuInstanceById, &t);
    if (rc)
        return rc;
    if (!fake_mig_enabled(t.dev))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!fake_find_gi(fake_mig_dev(t.dev), id))
        return NVML_ERROR_NOT_FOUND;
    *out = &g_gi[t.dev][id];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t h, unsigned int id, nvmlGpuInstance_t *gi)
{
    FAKE_LOCKED(gi_by_id(h, id, gi));
}

static nvmlReturn_t gi_info(nvmlGpuInstance_t h, nvmlGpuInstanceInfo_t *info)
{
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct gi_target t;
    nvmlReturn_t rc = resolve_gi(h, FN_nvmlGpuInstanceGetInfo, &t);
    if (rc)
        return rc;
    info->device = &g_phys[t.dev];
    info->id = t.gi->id;
    info->profileId = t.gi->profile_id;
    info->placement.start = t.gi->start;
    info->placement.size = t.gi->size;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t *info) { FAKE_LOCKED(gi_info(gi, info)); }

/* ------------------------------------------------------------------ CI profiles */

static nvmlReturn_t ci_profile_lookup(nvmlGpuInstance_t h, unsigned profile, unsigned eng, struct gi_target *t,
                                      unsigned *slices)
{
    nvmlReturn_t rc = resolve_gi(h, FN_nvmlGpuInstanceGetComputeInstanceProfileInfo, t);
    if (rc)
        return rc;
    if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT || eng >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    *slices = mig_ci_slices(profile);
    return mig_ci_allowed(t->profile->slices, *slices) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

#define FILL_CI_INFO(info, profile, slices, t)                               \
    do {                                                                     \
        (info)->id = (profile);                                              \
        (info)->sliceCount = (slices);                                       \
        (info)->instanceCount = (t).profile->slices / (slices);              \
        (info)->multiprocessorCount = (t).profile->sm / (t).profile->slices * (slices); \
        (info)->sharedCopyEngineCount = (t).profile->copy_engines;           \
        (info)->sharedDecoderCount = (t).profile->decoders;                  \
        (info)->sharedEncoderCount = (t).profile->encoders;                  \
        (info)->sharedJpegCount = (t).profile->jpegs;                        \
        (info)->sharedOfaCount = (t).profile->ofas;                          \
    } while (0)

static nvmlReturn_t ci_profile_info(nvmlGpuInstance_t h, unsigned profile, unsigned eng,
                                    nvmlComputeInstanceProfileInfo_t *info)
{
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct gi_target t;
    unsigned slices;
    nvmlReturn_t rc = ci_profile_lookup(h, profile, eng, &t, &slices);
    if (rc)
        return rc;
    memset(info, 0, sizeof(*info));
    FILL_CI_INFO(info, profile, slices, t);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gi, unsigned int profile,
                                                          unsigned int eng, nvmlComputeInstanceProfileInfo_t *info)
{
    FAKE_LOCKED(ci_profile_info(gi, profile, eng, info));
}

static nvmlReturn_t ci_profile_info_v(nvmlGpuInstance_t h, unsigned profile, unsigned eng,
                                      nvmlComputeInstanceProfileInfo_v2_t *info)
{
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned version = info->version;
    if (version != nvmlComputeInstanceProfileInfo_v2 && version != nvmlComputeInstanceProfileInfo_v3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    struct gi_target t;
    unsigned slices;
    nvmlReturn_t rc = ci_profile_lookup(h, profile, eng, &t, &slices);
    if (rc)
        return rc;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    if (slices == t.profile->slices)
        snprintf(name, sizeof(name), "MIG %s", t.profile->name);
    else
        snprintf(name, sizeof(name), "MIG %uc.%s", slices, t.profile->name);
    if (version == nvmlComputeInstanceProfileInfo_v2) {
        memset(info, 0, sizeof(*info));
        info->version = version;
        FILL_CI_INFO(info, profile, slices, t);
        memcpy(info->name, name, sizeof(name));
    } else {
        nvmlComputeInstanceProfileInfo_v3_t *v3 = (nvmlComputeInstanceProfileInfo_v3_t *)info;
        memset(v3, 0, sizeof(*v3));
        v3->version = version;
        FILL_CI_INFO(v3, profile, slices, t);
        memcpy(v3->name, name, sizeof(name));
    }
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gi, unsigned int profile,
                                                           unsigned int eng,
                                                           nvmlComputeInstanceProfileInfo_v2_t *info)
{
    FAKE_LOCKED(ci_profile_info_v(gi, profile, eng, info));
}

static nvmlReturn_t ci_remaining(nvmlGpuInstance_t h, unsigned profile, unsigned int *count)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct gi_target t;
    nvmlReturn_t rc = resolve_gi(h, FN_nvmlGpuInstanceGetComputeInstanceRemainingCapacity, &t);
    if (rc)
        return rc;
    if (!mig_ci_allowed(t.profile->slices, mig_ci_slices(profile)))
        return NVML_ERROR_INVALID_ARGUMENT;
    struct mig_gi_state sim = *t.gi;
    unsigned n = 0, start;
    while (sim.nci < MIG_MAX_CI && check_ci(&sim, t.profile->slices, profile, 0, &start) == NVML_SUCCESS) {
        struct mig_ci_state *c = &sim.ci[sim.nci++];
        c->id = MIG_MAX_CI;
        c->profile_id = profile;
        c->start = start;
        c->size = mig_ci_slices(profile);
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gi, unsigned int profile,
                                                                unsigned int *count)
{
    FAKE_LOCKED(ci_remaining(gi, profile, count));
}

static nvmlReturn_t ci_possible_placements(nvmlGpuInstance_t h, unsigned profile,
                                           nvmlComputeInstancePlacement_t *out, unsigned int *count)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct gi_target t;
    nvmlReturn_t rc = resolve_gi(h, FN_nvmlGpuInstanceGetComputeInstancePossiblePlacements, &t);
    if (rc)
        return rc;
    unsigned slices = mig_ci_slices(profile);
    if (!mig_ci_allowed(t.profile->slices, slices))
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned starts[8], n = ci_placements(t.profile->slices, slices, starts, 8);
    if (!out) {
        *count = n;
        return NVML_SUCCESS;
    }
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; i++) {
        out[i].start = starts[i];
        out[i].size = slices;
    }
    *count = n;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(nvmlGpuInstance_t gi, unsigned int profile,
                                                                 nvmlComputeInstancePlacement_t *placements,
                                                                 unsigned int *count)
{
    FAKE_LOCKED(ci_possible_placements(gi, profile, placements, count));
}

/* ------------------------------------------------------------------ CI lifecycle */

static nvmlReturn_t create_ci(nvmlGpuInstance_t h, unsigned profile, const nvmlComputeInstancePlacement_t *placement,
                              int explicit_placement, nvmlComputeInstance_t *out)
{
    if (!out || (explicit_placement && !placement))
        return NVML_ERROR_INVALID_ARGUMENT;
    struct gi_target t;
    nvmlReturn_t rc = resolve_gi(h,
                                 explicit_placement ? FN_nvmlGpuInstanceCreateComputeInstanceWithPlacement
                                                    : FN_nvmlGpuInstanceCreateComputeInstance,
                                 &t);
    if (rc)
        return rc;
    unsigned slices = mig_ci_slices(profile);
    if (!mig_ci_allowed(t.profile->slices, slices))
        return NVML_ERROR_INVALID_ARGUMENT;
    struct ci_create_arg a = {.gi = t.gi->id, .gi_slices = t.profile->slices, .profile = profile,
                              .explicit_placement = explicit_placement};
    if (explicit_placement) {
        if (placement->size != slices)
            return NVML_ERROR_INVALID_ARGUMENT;
        a.start = placement->start;
    }
    rc = mutate(t.dev, do_create_ci, &a);
    if (rc == NVML_SUCCESS)
        *out = &g_ci[t.dev][a.gi][a.id];
    return rc;
}
nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gi, unsigned int profile,
                                                  nvmlComputeInstance_t *ci)
{
    FAKE_LOCKED(create_ci(gi, profile, NULL, 0, ci));
}
nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(nvmlGpuInstance_t gi, unsigned int profile,
                                                               const nvmlComputeInstancePlacement_t *placement,
                                                               nvmlComputeInstance_t *ci)
{
    FAKE_LOCKED(create_ci(gi, profile, placement, 1, ci));
}

struct ci_target {
    unsigned dev;
    const struct mig_gi_state *gi;
    const struct mig_ci_state *ci;
};

static nvmlReturn_t resolve_ci(nvmlComputeInstance_t h, enum fake_fn fn, struct ci_target *t)
{
    unsigned dev, gi, ci;
    if (!ci_slot(h, &dev, &gi, &ci) || dev >= g_fake.cfg.ndevices)
        return NVML_ERROR_INVALID_ARGUMENT;
    t->dev = dev;
    t->gi = fake_find_gi(fake_mig_dev(dev), gi);
    t->ci = fake_find_ci(t->gi, ci);
    if (!t->ci)
        return NVML_ERROR_INVALID_ARGUMENT;
    return fake_injected(fn, (int)dev);
}

static nvmlReturn_t destroy_ci(nvmlComputeInstance_t h)
{
    struct ci_target t;
    nvmlReturn_t rc = resolve_ci(h, FN_nvmlComputeInstanceDestroy, &t);
    if (rc)
        return rc;
    struct instance_arg a = {t.gi->id, t.ci->id};
    return mutate(t.dev, do_destroy_ci, &a);
}
nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t ci) { FAKE_LOCKED(destroy_ci(ci)); }

static nvmlReturn_t get_cis(nvmlGpuInstance_t h, unsigned profile, nvmlComputeInstance_t *cis, unsigned int *count)
{
    if (!cis || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct gi_target t;
    nvmlReturn_t rc = resolve_gi(h, FN_nvmlGpuInstanceGetComputeInstances, &t);
    if (rc)
        return rc;
    unsigned slices = mig_ci_slices(profile);
    if (!mig_ci_allowed(t.profile->slices, slices))
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned k = 0, max = t.profile->slices / slices;
    for (unsigned id = 0; id < MIG_MAX_CI && k < max; id++) {
        const struct mig_ci_state *c = fake_find_ci(t.gi, id);
        if (c && c->profile_id == profile)
            cis[k++] = &g_ci[t.dev][t.gi->id][id];
    }
    *count = k;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gi, unsigned int profile,
                                                nvmlComputeInstance_t *cis, unsigned int *count)
{
    FAKE_LOCKED(get_cis(gi, profile, cis, count));
}

static nvmlReturn_t ci_by_id(nvmlGpuInstance_t h, unsigned id, nvmlComputeInstance_t *out)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct gi_target t;
    nvmlReturn_t rc = resolve_gi(h, FN_nvmlGpuInstanceGetComputeInstanceById, &t);
    if (rc)
        return rc;
    if (!fake_find_ci(t.gi, id))
        return NVML_ERROR_NOT_FOUND;
    *out = &g_ci[t.dev][t.gi->id][id];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gi, unsigned int id, nvmlComputeInstance_t *ci)
{
    FAKE_LOCKED(ci_by_id(gi, id, ci));
}

static nvmlReturn_t ci_info(nvmlComputeInstance_t h, nvmlComputeInstanceInfo_t *info)
{
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct ci_target t;
    nvmlReturn_t rc = resolve_ci(h, FN_nvmlComputeInstanceGetInfo, &t);
    if (rc)
        return rc;
    info->device = &g_phys[t.dev];
    info->gpuInstance = &g_gi[t.dev][t.gi->id];
    info->id = t.ci->id;
    info->profileId = t.ci->profile_id;
    info->placement.start = t.ci->start;
    info->placement.size = t.ci->size;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t *info)
{
    FAKE_LOCKED(ci_info(ci, info));
}
nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t *info)
{
    FAKE_LOCKED(ci_info(ci, info));
}

/* ------------------------------------------------------------------ MIG device handles */

static nvmlReturn_t is_mig_handle(nvmlDevice_t h, unsigned int *is_mig)
{
    if (!is_mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = fake_resolve(h, 1, 0, &t);
    if (rc)
        return rc;
    if ((rc = fake_injected(FN_nvmlDeviceIsMigDeviceHandle, (int)t.dev)))
        return rc;
    *is_mig = (unsigned)t.is_mig;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t h, unsigned int *is_mig) { FAKE_LOCKED(is_mig_handle(h, is_mig)); }

static nvmlReturn_t instance_id_of(nvmlDevice_t h, unsigned int *id, int want_ci)
{
    if (!id)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = fake_resolve(h, 1, 0, &t);
    if (rc)
        return rc;
    if ((rc = fake_injected(want_ci ? FN_nvmlDeviceGetComputeInstanceId : FN_nvmlDeviceGetGpuInstanceId,
                            (int)t.dev)))
        return rc;
    if (!t.is_mig)
        return NVML_ERROR_NOT_SUPPORTED;
    *id = want_ci ? t.ci->id : t.gi->id;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t h, unsigned int *id) { FAKE_LOCKED(instance_id_of(h, id, 0)); }
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t h, unsigned int *id) { FAKE_LOCKED(instance_id_of(h, id, 1)); }

static nvmlReturn_t max_mig_devices(nvmlDevice_t h, unsigned int *count)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = resolve_capable(h, FN_nvmlDeviceGetMaxMigDeviceCount, &t);
    if (rc)
        return rc;
    *count = t.d->model->max_mig_devices;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t h, unsigned int *count) { FAKE_LOCKED(max_mig_devices(h, count)); }

static nvmlReturn_t mig_handle_by_index(nvmlDevice_t h, unsigned index, nvmlDevice_t *out)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = resolve_capable(h, FN_nvmlDeviceGetMigDeviceHandleByIndex, &t);
    if (rc)
        return rc;
    if (index >= t.d->model->max_mig_devices)
        return NVML_ERROR_INVALID_ARGUMENT;
    const struct mig_dev_state *ds = fake_mig_dev(t.dev);
    unsigned order[MIG_MAX_GI], n = sorted_gis(ds, order), k = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct mig_gi_state *g = &ds->gi[order[i]];
        for (unsigned id = 0; id < MIG_MAX_CI; id++) {
            if (!fake_find_ci(g, id))
                continue;
            if (k++ == index) {
                *out = &g_migdev[t.dev][g->id][id];
                return NVML_SUCCESS;
            }
        }
    }
    return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t h, unsigned int index, nvmlDevice_t *mig)
{
    FAKE_LOCKED(mig_handle_by_index(h, index, mig));
}

static nvmlReturn_t parent_of(nvmlDevice_t h, nvmlDevice_t *out)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_target t;
    nvmlReturn_t rc = fake_resolve(h, 1, 0, &t);
    if (rc)
        return rc;
    if ((rc = fake_injected(FN_nvmlDeviceGetDeviceHandleFromMigDeviceHandle, (int)t.dev)))
        return rc;
    if (!t.is_mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    *out = &g_phys[t.dev];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *device)
{
    FAKE_LOCKED(parent_of(mig, device));
}
