/*
 * state.h - MIG state shared by every process that uses one config: the MIG mode
 * set through nvmlDeviceSetMigMode and the created GPU/compute instances.
 *
 * Stored as JSON in FAKE_NVML_STATE (default: "<config>.state"), keyed by GPU
 * UUID.  Writers hold an exclusive flock on "<state>.lock" for the whole
 * read-modify-write and replace the file atomically (temp file + rename), so
 * readers never need the lock and never see a half-written file.
 */
#ifndef FAKENVML_STATE_H
#define FAKENVML_STATE_H

#pragma GCC visibility push(hidden)

#include <stddef.h>

#include "config.h"

#define MIG_MAX_GI 8      /* concurrent GPU instances per GPU (7 on A100) */
#define MIG_MAX_GI_ID 16  /* GI ids are 1..15 */
#define MIG_MAX_CI 8      /* compute instances per GI; CI ids are 0..7 */

struct mig_ci_state {
    unsigned id, profile_id, start, size;
};

struct mig_gi_state {
    unsigned id, profile_id, start, size;
    unsigned nci;
    struct mig_ci_state ci[MIG_MAX_CI];
};

struct mig_dev_state {
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    int has_mode, mode;          /* has_mode == 0: the config's mig_mode applies */
    unsigned ngi;
    struct mig_gi_state gi[MIG_MAX_GI];
};

struct mig_state {
    unsigned ndev;
    struct mig_dev_state dev[FAKE_MAX_DEVICES];
};

/* Parse the state file's bytes. */
int mig_state_parse(const char *text, size_t len, struct mig_state *out, char *err, size_t errlen);
/* Load from path; a missing file is an empty state. */
int mig_state_load(const char *path, struct mig_state *out, char *err, size_t errlen);
/* Write atomically (temp + rename). */
int mig_state_save(const char *path, const struct mig_state *s, char *err, size_t errlen);
/* The device's entry; with create, adds an empty one (NULL when full or absent). */
struct mig_dev_state *mig_state_find(struct mig_state *s, const char *uuid, int create);
/* Take the advisory lock ("<path>.lock"); returns an fd for mig_state_unlock, or -1. */
int mig_state_lock(const char *path, int exclusive, char *err, size_t errlen);
void mig_state_unlock(int fd);

#pragma GCC visibility pop

#endif
