/*
 * fakenvml.h - internals shared by the fake NVML's API files (core.c, events.c, mig.c).
 *
 * Locking: every API function runs under g_fake.mu (FAKE_LOCKED); the only code
 * that runs unlocked is the sleep inside nvmlEventSetWait.
 *
 * Handles are addresses inside static tables (one byte per slot), so they stay
 * valid across config reloads and are checked by address range, never
 * dereferenced:
 *   physical device  &g_phys[dev]
 *   MIG device       &g_migdev[dev][gi_id][ci_id]
 *   GPU instance     &g_gi[dev][gi_id]
 *   compute instance &g_ci[dev][gi_id][ci_id]
 * A handle whose device or instance no longer exists gives INVALID_ARGUMENT.
 */
#ifndef FAKENVML_INTERNAL_H
#define FAKENVML_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>

#include "nvml_abi.h"

#pragma GCC visibility push(hidden)

#include "config.h"
#include "profiles.h"
#include "state.h"

struct nvmlDevice_st { char slot; };
struct nvmlGpuInstance_st { char slot; };
struct nvmlComputeInstance_st { char slot; };
_Static_assert(sizeof(struct nvmlDevice_st) == 1 && sizeof(struct nvmlGpuInstance_st) == 1 &&
                   sizeof(struct nvmlComputeInstance_st) == 1,
               "handle slots are one byte: slot index == byte offset");

#define FAKE_MAX_EVENT_SETS 64

struct nvmlEventSet_st {
    int used;
    unsigned long long mask[FAKE_MAX_DEVICES]; /* registered event types per device */
};

struct file_id {
    int exists;
    unsigned long long ino, dev, size;
    long long mtime_ns;
};

struct fake_lib {
    pthread_mutex_t mu;
    int refcount;                      /* nvmlInit calls minus nvmlShutdown calls */
    char config_path[PATH_MAX];
    char state_path[PATH_MAX];
    struct fake_config cfg;            /* last good config */
    struct file_id cfg_seen;           /* the config version last read (good or bad) */
    struct mig_state *mig;             /* cached MIG state */
    struct file_id state_seen;
    int inotify_fd;                    /* -1: stat both files on every call */
    long long last_stat_sec;           /* CLOCK_MONOTONIC_COARSE second of the last forced stat */
    /* Delivered-event cursors per device index (reset when the UUID there changes). */
    char cursor_uuid[FAKE_MAX_DEVICES][NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    size_t xid_delivered[FAKE_MAX_DEVICES];
    unsigned long long ecc_delivered[FAKE_MAX_DEVICES];
    struct nvmlEventSet_st sets[FAKE_MAX_EVENT_SETS];
};

extern struct fake_lib g_fake;
extern struct nvmlDevice_st g_phys[FAKE_MAX_DEVICES];
extern struct nvmlDevice_st g_migdev[FAKE_MAX_DEVICES][MIG_MAX_GI_ID][MIG_MAX_CI];
extern struct nvmlGpuInstance_st g_gi[FAKE_MAX_DEVICES][MIG_MAX_GI_ID];
extern struct nvmlComputeInstance_st g_ci[FAKE_MAX_DEVICES][MIG_MAX_GI_ID][MIG_MAX_CI];

/* Lock, check init, pick up file changes; then run `expr` and unlock. */
nvmlReturn_t fake_enter(void);
void fake_leave(void);
#define FAKE_LOCKED(expr)                        \
    do {                                         \
        nvmlReturn_t fake_rc_ = fake_enter();    \
        if (fake_rc_ == NVML_SUCCESS) {          \
            fake_rc_ = (expr);                   \
            fake_leave();                        \
        }                                        \
        return fake_rc_;                         \
    } while (0)

/* (inode, mtime, size) of a path; exists == 0 when stat fails. */
struct file_id fake_file_id(const char *path);

/* Re-read config/state files if they changed (lock held). */
void fake_reload(void);

/* A resolved device handle. */
struct fake_target {
    unsigned dev;                      /* physical device index */
    struct fake_device *d;
    int is_mig;
    const struct mig_gi_state *gi;     /* MIG handles only */
    const struct mig_ci_state *ci;
    const struct mig_gi_profile *profile;
};

/* Resolve a device handle; allow_mig == 0 turns MIG handles into `mig_rc`. */
nvmlReturn_t fake_resolve(nvmlDevice_t h, int allow_mig, nvmlReturn_t mig_rc, struct fake_target *t);
/* Injected error for fn on device dev (dev < 0: top level only); 0 if none. */
nvmlReturn_t fake_injected(enum fake_fn fn, int dev);

/* MIG helpers (mig.c). */
int fake_mig_enabled(unsigned dev);
const struct mig_dev_state *fake_mig_dev(unsigned dev); /* NULL when MIG is off or nothing was created */
const struct mig_gi_state *fake_find_gi(const struct mig_dev_state *ds, unsigned gi_id);
const struct mig_ci_state *fake_find_ci(const struct mig_gi_state *gi, unsigned ci_id);
void fake_mig_uuid(const char *parent_uuid, unsigned gi, unsigned ci, char *out, size_t outlen);

/* Print "fakenvml: <msg>" on stderr. */
void fake_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#pragma GCC visibility pop

#endif
