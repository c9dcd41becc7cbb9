/* core.c - init/shutdown, config and state reloading, handles, device queries. */
#include "fakenvml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CONFIG_MAX_BYTES (64u << 20)

struct fake_lib g_fake = {.mu = PTHREAD_MUTEX_INITIALIZER, .inotify_fd = -1};
struct nvmlDevice_st g_phys[FAKE_MAX_DEVICES];
struct nvmlDevice_st g_migdev[FAKE_MAX_DEVICES][MIG_MAX_GI_ID][MIG_MAX_CI];
struct nvmlGpuInstance_st g_gi[FAKE_MAX_DEVICES][MIG_MAX_GI_ID];
struct nvmlComputeInstance_st g_ci[FAKE_MAX_DEVICES][MIG_MAX_GI_ID][MIG_MAX_CI];

void fake_log(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "fakenvml: %s\n", msg);
    fflush(stderr);
}

/* ------------------------------------------------------------------ fork safety */

static void atfork_prepare(void) { pthread_mutex_lock(&g_fake.mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_fake.mu); }
static void atfork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    g_fake.mu = fresh;
    /* The inotify queue is shared with the parent: reading it here would steal
     * the parent's events.  The child falls back to stat-on-every-call. */
    if (g_fake.inotify_fd >= 0) {
        close(g_fake.inotify_fd);
        g_fake.inotify_fd = -1;
    }
}

/* dlclose() of the last reference: do not leak the inotify descriptor. */
__attribute__((destructor)) static void fake_unload(void)
{
    if (g_fake.inotify_fd >= 0)
        close(g_fake.inotify_fd);
    g_fake.inotify_fd = -1;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void install_atfork(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

/* ------------------------------------------------------------------ file watching */

struct file_id fake_file_id(const char *path)
{
    struct file_id id = {0};
    struct stat st;
    if (stat(path, &st) == 0) {
        id.exists = 1;
        id.ino = (unsigned long long)st.st_ino;
        id.dev = (unsigned long long)st.st_dev;
        id.size = (unsigned long long)st.st_size;
        id.mtime_ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    }
    return id;
}

static int file_id_eq(const struct file_id *a, const struct file_id *b)
{
    return a->exists == b->exists && a->ino == b->ino && a->dev == b->dev && a->size == b->size &&
           a->mtime_ns == b->mtime_ns;
}

static void watch_close(void)
{
    if (g_fake.inotify_fd >= 0)
        close(g_fake.inotify_fd);
    g_fake.inotify_fd = -1;
}

/* Watch the directories of both files so that a change costs a stat only when
 * something happened there.  Any problem falls back to stat-on-every-call. */
static void watch_setup(void)
{
    watch_close();
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0)
        return;
    const char *paths[2] = {g_fake.config_path, g_fake.state_path};
    for (int i = 0; i < 2; i++) {
        struct stat st;
        if (lstat(paths[i], &st) == 0 && S_ISLNK(st.st_mode)) {
            close(fd); /* symlinked files (ConfigMap style) change behind the link */
            return;
        }
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", paths[i]);
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof(dir), ".");
        else if (slash == dir)
            dir[1] = '\0';
        else
            *slash = '\0';
        if (inotify_add_watch(fd, dir,
                              IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_MODIFY |
                                  IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF) < 0) {
            close(fd);
            return;
        }
    }
    g_fake.inotify_fd = fd;
}

/* Whether either file may have changed since the last look.  Besides inotify
 * events, a plain stat at least once a second covers changes inotify cannot see
 * (a hard link changed through another directory, network file systems). */
static int changes_pending(void)
{
    if (g_fake.inotify_fd < 0)
        return 1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    int pending = ts.tv_sec != g_fake.last_stat_sec;
    g_fake.last_stat_sec = ts.tv_sec;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(g_fake.inotify_fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        pending = 1;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (ev->mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
                watch_close(); /* the watch is gone or lossy: stat from now on */
                return 1;
            }
            p += sizeof(struct inotify_event) + ev->len;
        }
    }
    return pending;
}

/* ------------------------------------------------------------------ loading */

static void reconcile_cursors(void)
{
    for (size_t i = 0; i < FAKE_MAX_DEVICES; i++) {
        if (i >= g_fake.cfg.ndevices) {
            continue;
        }
        const struct fake_device *d = &g_fake.cfg.devices[i];
        if (strcmp(g_fake.cursor_uuid[i], d->uuid) != 0) {
            snprintf(g_fake.cursor_uuid[i], sizeof(g_fake.cursor_uuid[i]), "%s", d->uuid);
            g_fake.xid_delivered[i] = 0;
            g_fake.ecc_delivered[i] = 0;
        }
        if (g_fake.xid_delivered[i] > d->nxids)
            g_fake.xid_delivered[i] = d->nxids;
        if (g_fake.ecc_delivered[i] > d->ecc_dbe_events)
            g_fake.ecc_delivered[i] = d->ecc_dbe_events;
    }
}

/* Read and parse the config.  initial: errors are returned (nvmlInit fails);
 * otherwise a bad file keeps the last good config and is reported once. */
static nvmlReturn_t load_config(int initial)
{
    struct file_id id = fake_file_id(g_fake.config_path);
    if (!initial && file_id_eq(&id, &g_fake.cfg_seen))
        return NVML_SUCCESS;
    g_fake.cfg_seen = id;
    char err[512];
    size_t len;
    char *text = fake_read_file(g_fake.config_path, CONFIG_MAX_BYTES, &len, err, sizeof(err));
    struct fake_config cfg;
    int ok = text && fake_config_parse(text, len, &cfg, err, sizeof(err)) == 0;
    free(text);
    if (!ok) {
        if (initial) {
            fake_log("%s: %s", g_fake.config_path, err);
            return id.exists ? NVML_ERROR_UNKNOWN : NVML_ERROR_DRIVER_NOT_LOADED;
        }
        fake_log("%s: %s; keeping the last good configuration", g_fake.config_path, err);
        return NVML_ERROR_UNKNOWN;
    }
    fake_config_free(&g_fake.cfg);
    g_fake.cfg = cfg;
    reconcile_cursors();
    return NVML_SUCCESS;
}

static nvmlReturn_t load_state(int initial)
{
    struct file_id id = fake_file_id(g_fake.state_path);
    if (!initial && file_id_eq(&id, &g_fake.state_seen))
        return NVML_SUCCESS;
    g_fake.state_seen = id;
    char err[512];
    struct mig_state *fresh = malloc(sizeof(*fresh));
    if (!fresh)
        return NVML_ERROR_MEMORY;
    if (mig_state_load(g_fake.state_path, fresh, err, sizeof(err)) != 0) {
        free(fresh);
        if (initial) {
            fake_log("%s: %s (MIG state file; delete it to reset MIG state)", g_fake.state_path, err);
            return NVML_ERROR_UNKNOWN;
        }
        fake_log("%s: %s; keeping the last good MIG state", g_fake.state_path, err);
        return NVML_ERROR_UNKNOWN;
    }
    free(g_fake.mig);
    g_fake.mig = fresh;
    return NVML_SUCCESS;
}

void fake_reload(void)
{
    if (!changes_pending())
        return;
    load_config(0);
    load_state(0);
}

nvmlReturn_t fake_enter(void)
{
    pthread_mutex_lock(&g_fake.mu);
    if (g_fake.refcount <= 0) {
        pthread_mutex_unlock(&g_fake.mu);
        return NVML_ERROR_UNINITIALIZED;
    }
    fake_reload();
    return NVML_SUCCESS;
}

void fake_leave(void) { pthread_mutex_unlock(&g_fake.mu); }

nvmlReturn_t fake_injected(enum fake_fn fn, int dev)
{
    int code = g_fake.cfg.errors.code[fn];
    if (!code && dev >= 0 && (size_t)dev < g_fake.cfg.ndevices)
        code = g_fake.cfg.devices[dev].errors.code[fn];
    return (nvmlReturn_t)code;
}

/* ------------------------------------------------------------------ init */

static nvmlReturn_t init_locked(void)
{
    if (g_fake.refcount > 0) {
        g_fake.refcount++;
        fake_reload();
        return NVML_SUCCESS;
    }
    const char *config = getenv("FAKE_NVML_CONFIG");
    if (!config || !*config) {
        fake_log("FAKE_NVML_CONFIG is not set: no fake GPUs to report (this is the fake libnvidia-ml.so.1)");
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    const char *state = getenv("FAKE_NVML_STATE");
    char state_path[PATH_MAX];
    int n = (state && *state) ? snprintf(state_path, sizeof(state_path), "%s", state)
                              : snprintf(state_path, sizeof(state_path), "%s.state", config);
    if (strlen(config) >= sizeof(g_fake.config_path) || n < 0 || (size_t)n >= sizeof(state_path)) {
        fake_log("FAKE_NVML_CONFIG/FAKE_NVML_STATE: path too long");
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (strcmp(config, g_fake.config_path) != 0) {
        /* Another config: forget what was delivered for the previous one. */
        memset(g_fake.cursor_uuid, 0, sizeof(g_fake.cursor_uuid));
        memset(g_fake.xid_delivered, 0, sizeof(g_fake.xid_delivered));
        memset(g_fake.ecc_delivered, 0, sizeof(g_fake.ecc_delivered));
    }
    snprintf(g_fake.config_path, sizeof(g_fake.config_path), "%s", config);
    snprintf(g_fake.state_path, sizeof(g_fake.state_path), "%s", state_path);
    pthread_once(&atfork_once, install_atfork);
    watch_setup(); /* before reading, so no change between read and watch is lost */
    nvmlReturn_t rc = load_config(1);
    if (rc == NVML_SUCCESS)
        rc = load_state(1);
    if (rc == NVML_SUCCESS && g_fake.cfg.errors.code[FN_nvmlInit])
        rc = (nvmlReturn_t)g_fake.cfg.errors.code[FN_nvmlInit];
    if (rc != NVML_SUCCESS) {
        watch_close();
        fake_config_free(&g_fake.cfg);
        return rc;
    }
    memset(g_fake.sets, 0, sizeof(g_fake.sets));
    g_fake.refcount = 1;
    return NVML_SUCCESS;
}

static nvmlReturn_t init_any(void)
{
    pthread_mutex_lock(&g_fake.mu);
    nvmlReturn_t rc = init_locked();
    pthread_mutex_unlock(&g_fake.mu);
    return rc;
}

nvmlReturn_t nvmlInit(void) { return init_any(); }
nvmlReturn_t nvmlInit_v2(void) { return init_any(); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags; /* NO_GPUS / NO_ATTACH change nothing for a fake */
    return init_any();
}

nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&g_fake.mu);
    if (g_fake.refcount <= 0) {
        pthread_mutex_unlock(&g_fake.mu);
        return NVML_ERROR_UNINITIALIZED;
    }
    if (--g_fake.refcount == 0) {
        memset(g_fake.sets, 0, sizeof(g_fake.sets));
        watch_close();
        fake_config_free(&g_fake.cfg);
        free(g_fake.mig);
        g_fake.mig = NULL;
        memset(&g_fake.cfg_seen, 0, sizeof(g_fake.cfg_seen));
        memset(&g_fake.state_seen, 0, sizeof(g_fake.state_seen));
    }
    pthread_mutex_unlock(&g_fake.mu);
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return "ECC is not supported for vGPU";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED: return "Deprecated";
    case NVML_ERROR_NOT_READY: return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    case NVML_ERROR_UNKNOWN: return "Unknown Error";
    }
    return "Unknown Error";
}

/* ------------------------------------------------------------------ handles */

static int slot_index(const void *p, const void *base, size_t count, size_t *idx)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;
    if (a < b || a >= b + count)
        return 0;
    *idx = a - b;
    return 1;
}

nvmlReturn_t fake_resolve(nvmlDevice_t h, int allow_mig, nvmlReturn_t mig_rc, struct fake_target *t)
{
    size_t idx;
    memset(t, 0, sizeof(*t));
    if (slot_index(h, g_phys, FAKE_MAX_DEVICES, &idx)) {
        if (idx >= g_fake.cfg.ndevices)
            return NVML_ERROR_INVALID_ARGUMENT;
        t->dev = (unsigned)idx;
        t->d = &g_fake.cfg.devices[idx];
        return NVML_SUCCESS;
    }
    if (slot_index(h, g_migdev, sizeof(g_migdev), &idx)) {
        unsigned dev = (unsigned)(idx / (MIG_MAX_GI_ID * MIG_MAX_CI));
        unsigned gi = (unsigned)(idx / MIG_MAX_CI % MIG_MAX_GI_ID);
        unsigned ci = (unsigned)(idx % MIG_MAX_CI);
        if (dev >= g_fake.cfg.ndevices)
            return NVML_ERROR_INVALID_ARGUMENT;
        const struct mig_dev_state *ds = fake_mig_dev(dev);
        const struct mig_gi_state *g = fake_find_gi(ds, gi);
        const struct mig_ci_state *c = fake_find_ci(g, ci);
        if (!c)
            return NVML_ERROR_INVALID_ARGUMENT; /* the instance was destroyed */
        if (!allow_mig)
            return mig_rc;
        t->dev = dev;
        t->d = &g_fake.cfg.devices[dev];
        t->is_mig = 1;
        t->gi = g;
        t->ci = c;
        t->profile = mig_profile_by_id(t->d->model, g->profile_id);
        return NVML_SUCCESS;
    }
    return NVML_ERROR_INVALID_ARGUMENT;
}

#define RESOLVE(h, allow_mig, mig_rc, fn)                                   \
    struct fake_target t;                                                   \
    nvmlReturn_t rc = fake_resolve((h), (allow_mig), (mig_rc), &t);         \
    if (rc != NVML_SUCCESS)                                                 \
        return rc;                                                          \
    if ((rc = fake_injected((fn), (int)t.dev)) != NVML_SUCCESS)             \
        return rc

static nvmlReturn_t copy_string(char *dst, unsigned int length, const char *src)
{
    if (!dst)
        return NVML_ERROR_INVALID_ARGUMENT;
    size_t n = strlen(src);
    if ((size_t)length < n + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, n + 1);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------ system */

static nvmlReturn_t driver_version(char *v, unsigned int len)
{
    nvmlReturn_t rc = fake_injected(FN_nvmlSystemGetDriverVersion, -1);
    return rc ? rc : copy_string(v, len, g_fake.cfg.driver_version);
}
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    FAKE_LOCKED(driver_version(version, length));
}

static nvmlReturn_t nvml_version(char *v, unsigned int len)
{
    nvmlReturn_t rc = fake_injected(FN_nvmlSystemGetNVMLVersion, -1);
    return rc ? rc : copy_string(v, len, g_fake.cfg.nvml_version);
}
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) { FAKE_LOCKED(nvml_version(version, length)); }

static nvmlReturn_t cuda_version(int *v)
{
    if (!v)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = fake_injected(FN_nvmlSystemGetCudaDriverVersion, -1);
    if (rc)
        return rc;
    *v = g_fake.cfg.cuda_driver_version;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { FAKE_LOCKED(cuda_version(v)); }
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { FAKE_LOCKED(cuda_version(v)); }

/* ------------------------------------------------------------------ discovery */

static nvmlReturn_t device_count(unsigned int *count)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = fake_injected(FN_nvmlDeviceGetCount, -1);
    if (rc)
        return rc;
    *count = (unsigned int)g_fake.cfg.ndevices;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *c) { FAKE_LOCKED(device_count(c)); }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *c) { FAKE_LOCKED(device_count(c)); }

static nvmlReturn_t handle_by_index(unsigned int index, nvmlDevice_t *device)
{
    if (!device || index >= g_fake.cfg.ndevices)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = fake_injected(FN_nvmlDeviceGetHandleByIndex, (int)index);
    if (rc)
        return rc;
    *device = &g_phys[index];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) { FAKE_LOCKED(handle_by_index(i, d)); }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) { FAKE_LOCKED(handle_by_index(i, d)); }

static nvmlReturn_t handle_by_uuid(const char *uuid, nvmlDevice_t *device)
{
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < g_fake.cfg.ndevices; i++) {
        if (strcmp(g_fake.cfg.devices[i].uuid, uuid) == 0) {
            nvmlReturn_t rc = fake_injected(FN_nvmlDeviceGetHandleByUUID, (int)i);
            if (rc)
                return rc;
            *device = &g_phys[i];
            return NVML_SUCCESS;
        }
    }
    if (strncmp(uuid, "MIG-", 4) == 0) {
        for (size_t i = 0; i < g_fake.cfg.ndevices; i++) {
            const struct mig_dev_state *ds = fake_mig_dev((unsigned)i);
            for (unsigned g = 0; ds && g < ds->ngi; g++) {
                for (unsigned c = 0; c < ds->gi[g].nci; c++) {
                    char mig[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
                    fake_mig_uuid(g_fake.cfg.devices[i].uuid, ds->gi[g].id, ds->gi[g].ci[c].id, mig, sizeof(mig));
                    if (strcmp(mig, uuid) == 0) {
                        nvmlReturn_t rc = fake_injected(FN_nvmlDeviceGetHandleByUUID, (int)i);
                        if (rc)
                            return rc;
                        *device = &g_migdev[i][ds->gi[g].id][ds->gi[g].ci[c].id];
                        return NVML_SUCCESS;
                    }
                }
            }
        }
    }
    nvmlReturn_t rc = fake_injected(FN_nvmlDeviceGetHandleByUUID, -1);
    return rc ? rc : NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) { FAKE_LOCKED(handle_by_uuid(uuid, d)); }

static nvmlReturn_t handle_by_pci(const char *bus_id, nvmlDevice_t *device)
{
    if (!bus_id || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned dom, bus, dev, fn;
    if (sscanf(bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < g_fake.cfg.ndevices; i++) {
        const struct fake_device *d = &g_fake.cfg.devices[i];
        if (d->pci_domain == dom && d->pci_bus == bus && d->pci_device == dev && fn == 0) {
            nvmlReturn_t rc = fake_injected(FN_nvmlDeviceGetHandleByPciBusId, (int)i);
            if (rc)
                return rc;
            *device = &g_phys[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *b, nvmlDevice_t *d) { FAKE_LOCKED(handle_by_pci(b, d)); }

static nvmlReturn_t device_index(nvmlDevice_t h, unsigned int *index)
{
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    RESOLVE(h, 0, NVML_ERROR_NOT_SUPPORTED, FN_nvmlDeviceGetIndex);
    *index = t.dev;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t h, unsigned int *i) { FAKE_LOCKED(device_index(h, i)); }

/* ------------------------------------------------------------------ identity */

static nvmlReturn_t device_uuid(nvmlDevice_t h, char *uuid, unsigned int length)
{
    RESOLVE(h, 1, 0, FN_nvmlDeviceGetUUID);
    if (!t.is_mig)
        return copy_string(uuid, length, t.d->uuid);
    char mig[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    fake_mig_uuid(t.d->uuid, t.gi->id, t.ci->id, mig, sizeof(mig));
    return copy_string(uuid, length, mig);
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char *u, unsigned int l) { FAKE_LOCKED(device_uuid(h, u, l)); }

static nvmlReturn_t device_name(nvmlDevice_t h, char *name, unsigned int length)
{
    RESOLVE(h, 1, 0, FN_nvmlDeviceGetName);
    if (!t.is_mig)
        return copy_string(name, length, t.d->name);
    char mig[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 32];
    snprintf(mig, sizeof(mig), "%s MIG %s", t.d->name, t.profile ? t.profile->name : "?");
    return copy_string(name, length, mig);
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *n, unsigned int l) { FAKE_LOCKED(device_name(h, n, l)); }

static nvmlReturn_t minor_number(nvmlDevice_t h, unsigned int *minor)
{
    if (!minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    RESOLVE(h, 0, NVML_ERROR_NOT_SUPPORTED, FN_nvmlDeviceGetMinorNumber);
    *minor = t.d->minor;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t h, unsigned int *m) { FAKE_LOCKED(minor_number(h, m)); }

/* legacy: fill only the v2 layout (52 bytes: up to pciSubSystemId plus 16 reserved bytes). */
static nvmlReturn_t pci_info(nvmlDevice_t h, nvmlPciInfo_t *pci, int legacy)
{
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    RESOLVE(h, 1, 0, FN_nvmlDeviceGetPciInfo);
    const struct fake_device *d = t.d;
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", d->pci_domain & 0xFFFF, d->pci_bus,
             d->pci_device);
    pci->domain = d->pci_domain;
    pci->bus = d->pci_bus;
    pci->device = d->pci_device;
    pci->pciDeviceId = d->pci_device_id;
    pci->pciSubSystemId = d->pci_subsystem_id;
    if (legacy)
        memset(pci->busId, 0, 16);
    else
        snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", d->pci_domain, d->pci_bus, d->pci_device);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t h, nvmlPciInfo_t *p) { FAKE_LOCKED(pci_info(h, p, 1)); }
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t *p) { FAKE_LOCKED(pci_info(h, p, 0)); }

static nvmlReturn_t compute_capability(nvmlDevice_t h, int *major, int *minor)
{
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    RESOLVE(h, 1, 0, FN_nvmlDeviceGetCudaComputeCapability);
    *major = t.d->cc_major;
    *minor = t.d->cc_minor;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t h, int *a, int *b) { FAKE_LOCKED(compute_capability(h, a, b)); }

static nvmlReturn_t numa_node(nvmlDevice_t h, unsigned int *node)
{
    if (!node)
        return NVML_ERROR_INVALID_ARGUMENT;
    RESOLVE(h, 1, 0, FN_nvmlDeviceGetNumaNodeId);
    if (t.d->numa_node < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *node = (unsigned int)t.d->numa_node;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t h, unsigned int *n) { FAKE_LOCKED(numa_node(h, n)); }

/* ------------------------------------------------------------------ usage */

#define MIB 1048576ULL

static int process_on(const struct fake_target *t, const struct fake_process *p)
{
    return !t->is_mig || (p->gi == t->gi->id && p->ci == t->ci->id);
}

static void memory_of(const struct fake_target *t, unsigned long long *total, unsigned long long *used)
{
    if (!t->is_mig) {
        *total = t->d->memory_total_mib * MIB;
        *used = t->d->memory_used_mib * MIB;
        return;
    }
    *total = (t->profile ? t->profile->memory_mib : 0) * MIB;
    *used = 0;
    for (size_t i = 0; i < t->d->nprocesses; i++)
        if (process_on(t, &t->d->processes[i]))
            *used += t->d->processes[i].used_mib * MIB;
}

static nvmlReturn_t memory_info(nvmlDevice_t h, nvmlMemory_t *m)
{
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    RESOLVE(h, 1, 0, FN_nvmlDeviceGetMemoryInfo);
    unsigned long long total, used;
    memory_of(&t, &total, &used);
    m->total = total;
    m->used = used;
    m->free = used < total ? total - used : 0;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *m) { FAKE_LOCKED(memory_info(h, m)); }

static nvmlReturn_t memory_info_v2(nvmlDevice_t h, nvmlMemory_v2_t *m)
{
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    RESOLVE(h, 1, 0, FN_nvmlDeviceGetMemoryInfo);
    unsigned long long total, used;
    memory_of(&t, &total, &used);
    m->total = total;
    m->reserved = 0;
    m->used = used;
    m->free = used < total ? total - used : 0;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t *m) { FAKE_LOCKED(memory_info_v2(h, m)); }

static nvmlReturn_t utilization(nvmlDevice_t h, nvmlUtilization_t *u)
{
    if (!u)
        return NVML_ERROR_INVALID_ARGUMENT;
    RESOLVE(h, 0, NVML_ERROR_NOT_SUPPORTED, FN_nvmlDeviceGetUtilizationRates);
    if (fake_mig_enabled(t.dev))
        return NVML_ERROR_NOT_SUPPORTED; /* as on real MIG-enabled GPUs */
    u->gpu = t.d->utilization_gpu;
    u->memory = t.d->utilization_memory;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t *u) { FAKE_LOCKED(utilization(h, u)); }

/* version: 1 = nvmlProcessInfo_v1_t entries, otherwise nvmlProcessInfo_t. */
static nvmlReturn_t running_processes(nvmlDevice_t h, unsigned int *count, void *infos, int version)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    RESOLVE(h, 1, 0, FN_nvmlDeviceGetComputeRunningProcesses);
    int mig = fake_mig_enabled(t.dev);
    unsigned n = 0;
    for (size_t i = 0; i < t.d->nprocesses; i++)
        n += process_on(&t, &t.d->processes[i]);
    if (n == 0) {
        *count = 0;
        return NVML_SUCCESS;
    }
    if (!infos || *count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned k = 0;
    for (size_t i = 0; i < t.d->nprocesses; i++) {
        const struct fake_process *p = &t.d->processes[i];
        if (!process_on(&t, p))
            continue;
        if (version == 1) {
            nvmlProcessInfo_v1_t *o = (nvmlProcessInfo_v1_t *)infos + k;
            o->pid = p->pid;
            o->usedGpuMemory = p->used_mib * MIB;
        } else {
            nvmlProcessInfo_t *o = (nvmlProcessInfo_t *)infos + k;
            o->pid = p->pid;
            o->usedGpuMemory = p->used_mib * MIB;
            o->gpuInstanceId = mig ? p->gi : FAKE_NO_INSTANCE;
            o->computeInstanceId = mig ? p->ci : FAKE_NO_INSTANCE;
        }
        k++;
    }
    *count = k;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t h, unsigned int *c, nvmlProcessInfo_v1_t *i)
{
    FAKE_LOCKED(running_processes(h, c, i, 1));
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t h, unsigned int *c, nvmlProcessInfo_v2_t *i)
{
    FAKE_LOCKED(running_processes(h, c, i, 2));
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int *c, nvmlProcessInfo_t *i)
{
    FAKE_LOCKED(running_processes(h, c, i, 3));
}

static nvmlReturn_t graphics_processes(nvmlDevice_t h, unsigned int *count)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    RESOLVE(h, 1, 0, FN_nvmlDeviceGetGraphicsRunningProcesses);
    *count = 0; /* a compute node: no graphics contexts */
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t h, unsigned int *c, nvmlProcessInfo_t *i)
{
    (void)i;
    FAKE_LOCKED(graphics_processes(h, c));
}

static nvmlReturn_t process_utilization(nvmlDevice_t h, nvmlProcessUtilizationSample_t *samples,
                                        unsigned int *count, unsigned long long last_seen)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    RESOLVE(h, 0, NVML_ERROR_NOT_SUPPORTED, FN_nvmlDeviceGetProcessUtilization);
    if (fake_mig_enabled(t.dev))
        return NVML_ERROR_NOT_SUPPORTED;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long now_us = (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
    unsigned n = last_seen < now_us ? (unsigned)t.d->nprocesses : 0;
    if (n == 0) {
        *count = 0;
        return NVML_ERROR_NOT_FOUND; /* NVML: no samples newer than lastSeenTimeStamp */
    }
    if (!samples || *count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; i++) {
        const struct fake_process *p = &t.d->processes[i];
        samples[i].pid = p->pid;
        samples[i].timeStamp = now_us;
        samples[i].smUtil = p->sm_util;
        samples[i].memUtil = p->mem_util;
        samples[i].encUtil = 0;
        samples[i].decUtil = 0;
    }
    *count = n;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t h, nvmlProcessUtilizationSample_t *s, unsigned int *c,
                                             unsigned long long last)
{
    FAKE_LOCKED(process_utilization(h, s, c, last));
}
