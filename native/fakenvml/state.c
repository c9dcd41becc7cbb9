/* state.c - MIG state file (see state.h). */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

#define STATE_MAX_BYTES (4u << 20)

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int only_keys(const struct json_value *obj, const char *const *allowed, const char *path, char *err,
                     size_t errlen)
{
    if (obj->type != JSON_OBJECT)
        return fail(err, errlen, "%s: expected an object (line %d)", path, obj->line);
    for (size_t i = 0; i < obj->u.object.count; i++) {
        const struct json_member *m = &obj->u.object.members[i];
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= strlen(*a) == m->key_len && memcmp(*a, m->key, m->key_len) == 0;
        if (!ok)
            return fail(err, errlen, "%s: unknown key \"%.80s\" (line %d)", path, m->key, m->value.line);
    }
    return 0;
}

static int uint_member(const struct json_value *obj, const char *key, unsigned max, unsigned *out, const char *path,
                       char *err, size_t errlen)
{
    const struct json_value *v = json_get(obj, key);
    if (!v || v->type != JSON_NUMBER || !v->u.number.is_integer || v->u.number.integer < 0 ||
        v->u.number.integer > (long long)max)
        return fail(err, errlen, "%s.%s: expected an integer in [0, %u]", path, key, max);
    *out = (unsigned)v->u.number.integer;
    return 0;
}

static int placement_member(const struct json_value *obj, unsigned *start, unsigned *size, const char *path,
                            char *err, size_t errlen)
{
    const struct json_value *v = json_get(obj, "placement");
    if (!v || v->type != JSON_ARRAY || v->u.array.count != 2)
        return fail(err, errlen, "%s.placement: expected [start, size]", path);
    for (int i = 0; i < 2; i++) {
        const struct json_value *x = &v->u.array.items[i];
        if (x->type != JSON_NUMBER || !x->u.number.is_integer || x->u.number.integer < 0 ||
            x->u.number.integer > 64)
            return fail(err, errlen, "%s.placement[%d]: expected an integer in [0, 64]", path, i);
        *(i ? size : start) = (unsigned)x->u.number.integer;
    }
    return 0;
}

static const char *const TOP_KEYS[] = {"version", "devices", NULL};
static const char *const DEV_KEYS[] = {"uuid", "mig_mode", "gpu_instances", NULL};
static const char *const GI_KEYS[] = {"id", "profile_id", "placement", "compute_instances", NULL};
static const char *const CI_KEYS[] = {"id", "profile_id", "placement", NULL};

static int parse_gi(const struct json_value *g, const char *path, struct mig_gi_state *gs, char *err, size_t errlen)
{
    if (only_keys(g, GI_KEYS, path, err, errlen) != 0 ||
        uint_member(g, "id", MIG_MAX_GI_ID - 1, &gs->id, path, err, errlen) != 0 ||
        uint_member(g, "profile_id", 1000, &gs->profile_id, path, err, errlen) != 0 ||
        placement_member(g, &gs->start, &gs->size, path, err, errlen) != 0)
        return -1;
    const struct json_value *cis = json_get(g, "compute_instances");
    if (!cis)
        return 0;
    if (cis->type != JSON_ARRAY || cis->u.array.count > MIG_MAX_CI)
        return fail(err, errlen, "%s.compute_instances: expected an array of at most %d", path, MIG_MAX_CI);
    for (size_t k = 0; k < cis->u.array.count; k++) {
        char cp[128];
        snprintf(cp, sizeof(cp), "%.80s.compute_instances[%zu]", path, k);
        const struct json_value *c = &cis->u.array.items[k];
        struct mig_ci_state *cs = &gs->ci[k];
        if (only_keys(c, CI_KEYS, cp, err, errlen) != 0 ||
            uint_member(c, "id", MIG_MAX_CI - 1, &cs->id, cp, err, errlen) != 0 ||
            uint_member(c, "profile_id", 1000, &cs->profile_id, cp, err, errlen) != 0 ||
            placement_member(c, &cs->start, &cs->size, cp, err, errlen) != 0)
            return -1;
        for (size_t j = 0; j < k; j++)
            if (gs->ci[j].id == cs->id)
                return fail(err, errlen, "%s.id: duplicate compute instance id %u", cp, cs->id);
        gs->nci = (unsigned)k + 1;
    }
    return 0;
}

int mig_state_parse(const char *text, size_t len, struct mig_state *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    struct json_doc doc;
    if (json_parse(text, len, &doc, err, errlen) != 0)
        return -1;
    int rc = -1;
    const struct json_value *root = doc.root;
    if (only_keys(root, TOP_KEYS, "top level", err, errlen) != 0)
        goto done;
    const struct json_value *devs = json_get(root, "devices");
    if (!devs || devs->type != JSON_ARRAY || devs->u.array.count > FAKE_MAX_DEVICES) {
        fail(err, errlen, "devices: expected an array of at most %d entries", FAKE_MAX_DEVICES);
        goto done;
    }
    for (size_t i = 0; i < devs->u.array.count; i++) {
        char path[64];
        snprintf(path, sizeof(path), "devices[%zu]", i);
        const struct json_value *d = &devs->u.array.items[i];
        struct mig_dev_state *ds = &out->dev[i];
        if (only_keys(d, DEV_KEYS, path, err, errlen) != 0)
            goto done;
        const struct json_value *uuid = json_get(d, "uuid");
        if (!uuid || uuid->type != JSON_STRING || uuid->u.string.len == 0 ||
            uuid->u.string.len >= sizeof(ds->uuid)) {
            fail(err, errlen, "%s.uuid: expected a GPU UUID string", path);
            goto done;
        }
        memcpy(ds->uuid, uuid->u.string.chars, uuid->u.string.len + 1);
        const struct json_value *mode = json_get(d, "mig_mode");
        if (mode) {
            if (mode->type != JSON_BOOL) {
                fail(err, errlen, "%s.mig_mode: expected a boolean", path);
                goto done;
            }
            ds->has_mode = 1;
            ds->mode = mode->u.boolean;
        }
        const struct json_value *gis = json_get(d, "gpu_instances");
        if (gis) {
            if (gis->type != JSON_ARRAY || gis->u.array.count > MIG_MAX_GI) {
                fail(err, errlen, "%s.gpu_instances: expected an array of at most %d", path, MIG_MAX_GI);
                goto done;
            }
            for (size_t k = 0; k < gis->u.array.count; k++) {
                char gp[96];
                snprintf(gp, sizeof(gp), "%.40s.gpu_instances[%zu]", path, k);
                if (parse_gi(&gis->u.array.items[k], gp, &ds->gi[k], err, errlen) != 0)
                    goto done;
                for (size_t j = 0; j < k; j++)
                    if (ds->gi[j].id == ds->gi[k].id) {
                        fail(err, errlen, "%s.id: duplicate GPU instance id %u", gp, ds->gi[k].id);
                        goto done;
                    }
                ds->ngi = (unsigned)k + 1;
            }
        }
        out->ndev = (unsigned)i + 1;
    }
    rc = 0;
done:
    json_free(&doc);
    return rc;
}

int mig_state_load(const char *path, struct mig_state *out, char *err, size_t errlen)
{
    size_t len;
    char ferr[160];
    char *text = fake_read_file(path, STATE_MAX_BYTES, &len, ferr, sizeof(ferr));
    if (!text) {
        struct stat st;
        if (stat(path, &st) != 0 && errno == ENOENT) {
            memset(out, 0, sizeof(*out));
            return 0;
        }
        return fail(err, errlen, "%s", ferr);
    }
    int rc = mig_state_parse(text, len, out, err, errlen);
    free(text);
    return rc;
}

int mig_state_save(const char *path, const struct mig_state *s, char *err, size_t errlen)
{
    struct json_buf b;
    jb_init(&b);
    jb_raw(&b, "{\"version\": 1, \"devices\": [");
    for (unsigned i = 0; i < s->ndev; i++) {
        const struct mig_dev_state *d = &s->dev[i];
        jb_raw(&b, i ? ",\n  {\"uuid\": " : "\n  {\"uuid\": ");
        jb_string(&b, d->uuid);
        if (d->has_mode)
            jb_printf(&b, ", \"mig_mode\": %s", d->mode ? "true" : "false");
        jb_raw(&b, ", \"gpu_instances\": [");
        for (unsigned g = 0; g < d->ngi; g++) {
            const struct mig_gi_state *gi = &d->gi[g];
            jb_printf(&b, "%s\n    {\"id\": %u, \"profile_id\": %u, \"placement\": [%u, %u], \"compute_instances\": [",
                      g ? "," : "", gi->id, gi->profile_id, gi->start, gi->size);
            for (unsigned c = 0; c < gi->nci; c++) {
                const struct mig_ci_state *ci = &gi->ci[c];
                jb_printf(&b, "%s{\"id\": %u, \"profile_id\": %u, \"placement\": [%u, %u]}", c ? ", " : "", ci->id,
                          ci->profile_id, ci->start, ci->size);
            }
            jb_raw(&b, "]}");
        }
        jb_raw(&b, "]}");
    }
    jb_raw(&b, "\n]}\n");
    if (b.failed) {
        jb_free(&b);
        return fail(err, errlen, "out of memory");
    }
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
        jb_free(&b);
        return fail(err, errlen, "path too long");
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        jb_free(&b);
        return fail(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    }
    size_t off = 0;
    while (off < b.len) {
        ssize_t w = write(fd, b.data + off, b.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            jb_free(&b);
            return fail(err, errlen, "cannot write %s: %s", tmp, strerror(e));
        }
        off += (size_t)w;
    }
    jb_free(&b);
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return fail(err, errlen, "cannot replace %s: %s", path, strerror(e));
    }
    return 0;
}

struct mig_dev_state *mig_state_find(struct mig_state *s, const char *uuid, int create)
{
    for (unsigned i = 0; i < s->ndev; i++)
        if (strcmp(s->dev[i].uuid, uuid) == 0)
            return &s->dev[i];
    if (!create || s->ndev >= FAKE_MAX_DEVICES || strlen(uuid) >= sizeof(s->dev[0].uuid))
        return NULL;
    struct mig_dev_state *d = &s->dev[s->ndev++];
    memset(d, 0, sizeof(*d));
    strcpy(d->uuid, uuid);
    return d;
}

int mig_state_lock(const char *path, int exclusive, char *err, size_t errlen)
{
    char lock[PATH_MAX];
    if (snprintf(lock, sizeof(lock), "%s.lock", path) >= (int)sizeof(lock)) {
        fail(err, errlen, "path too long");
        return -1;
    }
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        fail(err, errlen, "cannot open lock file %s: %s", lock, strerror(errno));
        return -1;
    }
    while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) != 0) {
        if (errno == EINTR)
            continue;
        fail(err, errlen, "cannot lock %s: %s", lock, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

void mig_state_unlock(int fd)
{
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        close(fd);
    }
}
