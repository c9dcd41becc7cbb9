/* config.c - strict parser for the FAKE_NVML_CONFIG JSON file (see config.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

#define MIB_LIMIT (1ULL << 40) /* sanity bound for MiB values */

static const char *const FN_NAMES[FN_COUNT] = {
#define FAKE_FN_NAME(name) #name,
    FAKE_FUNCTIONS(FAKE_FN_NAME)
#undef FAKE_FN_NAME
};

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *type_name(enum json_type t)
{
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    }
    return "?";
}

static int check_keys(const struct json_value *obj, const char *path, const char *const *allowed, char *err,
                      size_t errlen)
{
    for (size_t i = 0; i < obj->u.object.count; i++) {
        const struct json_member *m = &obj->u.object.members[i];
        int ok = 0;
        for (const char *const *a = allowed; *a; a++) {
            if (strlen(*a) == m->key_len && memcmp(*a, m->key, m->key_len) == 0) {
                ok = 1;
                break;
            }
        }
        if (!ok)
            return fail(err, errlen, "%s: unknown key \"%.80s\" (line %d)", path, m->key, m->value.line);
    }
    return 0;
}

static int get_int(const struct json_value *v, const char *path, long long min, long long max, long long *out,
                   char *err, size_t errlen)
{
    if (v->type != JSON_NUMBER || !v->u.number.is_integer)
        return fail(err, errlen, "%s: expected an integer, got %s (line %d)", path,
                    v->type == JSON_NUMBER ? "a non-integer number" : type_name(v->type), v->line);
    if (v->u.number.integer < min || v->u.number.integer > max)
        return fail(err, errlen, "%s: %lld is out of range [%lld, %lld] (line %d)", path,
                    (long long)v->u.number.integer, min, max, v->line);
    *out = v->u.number.integer;
    return 0;
}

/* Optional integer member: keeps *out when absent. */
static int opt_int(const struct json_value *obj, const char *key, const char *path, long long min, long long max,
                   long long *out, char *err, size_t errlen)
{
    const struct json_value *v = json_get(obj, key);
    if (!v)
        return 0;
    char p[256];
    snprintf(p, sizeof(p), "%.160s.%.60s", path, key);
    return get_int(v, p, min, max, out, err, errlen);
}

static int opt_bool(const struct json_value *obj, const char *key, const char *path, int *out, char *err,
                    size_t errlen)
{
    const struct json_value *v = json_get(obj, key);
    if (!v)
        return 0;
    if (v->type != JSON_BOOL)
        return fail(err, errlen, "%s.%s: expected a boolean, got %s (line %d)", path, key, type_name(v->type),
                    v->line);
    *out = v->u.boolean;
    return 0;
}

/* String member copied into buf (bufsize includes the NUL). required: error when absent. */
static int get_string(const struct json_value *obj, const char *key, const char *path, int required, char *buf,
                      size_t bufsize, char *err, size_t errlen)
{
    const struct json_value *v = json_get(obj, key);
    if (!v) {
        if (required)
            return fail(err, errlen, "%s: missing required key \"%s\"", path, key);
        return 0;
    }
    if (v->type != JSON_STRING)
        return fail(err, errlen, "%s.%s: expected a string, got %s (line %d)", path, key, type_name(v->type),
                    v->line);
    if (v->u.string.len == 0 || v->u.string.len >= bufsize || strlen(v->u.string.chars) != v->u.string.len)
        return fail(err, errlen, "%s.%s: must be a non-empty string of at most %zu bytes (line %d)", path, key,
                    bufsize - 1, v->line);
    memcpy(buf, v->u.string.chars, v->u.string.len + 1);
    return 0;
}

static int fn_lookup(const char *name, size_t len)
{
    char base[96];
    if (len == 0 || len >= sizeof(base))
        return -1;
    memcpy(base, name, len);
    base[len] = '\0';
    /* Accept versioned spellings: strip "_v<digits>", then a trailing "V". */
    char *v = strrchr(base, '_');
    if (v && v[1] == 'v' && v[2] != '\0' && strspn(v + 2, "0123456789") == strlen(v + 2))
        *v = '\0';
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < FN_COUNT; i++)
            if (strcmp(base, FN_NAMES[i]) == 0)
                return i;
        size_t n = strlen(base);
        if (pass == 0 && n > 1 && base[n - 1] == 'V')
            base[n - 1] = '\0';
        else
            break;
    }
    return -1;
}

static int parse_errors(const struct json_value *obj, const char *path, struct fake_errors *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const struct json_value *v = json_get(obj, "errors");
    if (!v)
        return 0;
    char p[160];
    snprintf(p, sizeof(p), "%s.errors", path);
    if (v->type != JSON_OBJECT)
        return fail(err, errlen, "%s: expected an object, got %s (line %d)", p, type_name(v->type), v->line);
    for (size_t i = 0; i < v->u.object.count; i++) {
        const struct json_member *m = &v->u.object.members[i];
        int fn = fn_lookup(m->key, m->key_len);
        if (fn < 0)
            return fail(err, errlen, "%s: unknown key \"%.80s\": not an NVML function this library can fail (line %d)",
                        p, m->key, m->value.line);
        char kp[256];
        snprintf(kp, sizeof(kp), "%s.%.80s", p, m->key);
        long long code;
        if (get_int(&m->value, kp, 1, NVML_ERROR_UNKNOWN, &code, err, errlen) != 0)
            return -1;
        out->code[fn] = (int)code;
        out->any = 1;
    }
    return 0;
}

/* "DDDDDDDD:BB:DD.F" or "DDDD:BB:DD.F" (hex). */
static int parse_bus_id(const char *s, unsigned *domain, unsigned *bus, unsigned *dev)
{
    unsigned d, b, v, f;
    int n = 0;
    size_t len = strlen(s);
    if (sscanf(s, "%x:%x:%x.%x%n", &d, &b, &v, &f, &n) != 4 || (size_t)n != len)
        return -1;
    const char *c1 = strchr(s, ':');
    if (!c1 || (c1 - s != 4 && c1 - s != 8) || strspn(s, "0123456789abcdefABCDEF:.") != len)
        return -1;
    if (b > 0xFF || v > 0x1F || f > 7)
        return -1;
    *domain = d;
    *bus = b;
    *dev = v;
    return 0;
}

static const char *const PROCESS_KEYS[] = {"pid", "used_memory_mib", "sm_util", "mem_util", "gpu_instance_id",
                                           "compute_instance_id", NULL};

static int parse_instance_ids(const struct json_value *obj, const char *path, unsigned *gi, unsigned *ci, char *err,
                              size_t errlen)
{
    long long g = -1, c = -1;
    if (opt_int(obj, "gpu_instance_id", path, 0, 0xFFFFFFFELL, &g, err, errlen) != 0 ||
        opt_int(obj, "compute_instance_id", path, 0, 0xFFFFFFFELL, &c, err, errlen) != 0)
        return -1;
    if ((g < 0) != (c < 0))
        return fail(err, errlen, "%s: gpu_instance_id and compute_instance_id must be given together", path);
    *gi = g < 0 ? FAKE_NO_INSTANCE : (unsigned)g;
    *ci = c < 0 ? FAKE_NO_INSTANCE : (unsigned)c;
    return 0;
}

static int parse_processes(const struct json_value *dev, const char *path, struct fake_device *d, char *err,
                           size_t errlen)
{
    const struct json_value *v = json_get(dev, "processes");
    if (!v)
        return 0;
    if (v->type != JSON_ARRAY)
        return fail(err, errlen, "%s.processes: expected an array, got %s (line %d)", path, type_name(v->type),
                    v->line);
    if (v->u.array.count > FAKE_MAX_PROCESSES)
        return fail(err, errlen, "%s.processes: more than %d entries", path, FAKE_MAX_PROCESSES);
    if (v->u.array.count == 0)
        return 0;
    d->processes = calloc(v->u.array.count, sizeof(*d->processes));
    if (!d->processes)
        return fail(err, errlen, "out of memory");
    for (size_t i = 0; i < v->u.array.count; i++) {
        const struct json_value *p = &v->u.array.items[i];
        char pp[160];
        snprintf(pp, sizeof(pp), "%s.processes[%zu]", path, i);
        if (p->type != JSON_OBJECT)
            return fail(err, errlen, "%s: expected an object, got %s (line %d)", pp, type_name(p->type), p->line);
        if (check_keys(p, pp, PROCESS_KEYS, err, errlen) != 0)
            return -1;
        const struct json_value *pid = json_get(p, "pid");
        if (!pid)
            return fail(err, errlen, "%s: missing required key \"pid\"", pp);
        long long pidv, used = 0, sm = 0, mem = 0;
        char kp[192];
        snprintf(kp, sizeof(kp), "%s.pid", pp);
        if (get_int(pid, kp, 1, 0xFFFFFFFFLL, &pidv, err, errlen) != 0 ||
            opt_int(p, "used_memory_mib", pp, 0, (long long)MIB_LIMIT, &used, err, errlen) != 0 ||
            opt_int(p, "sm_util", pp, 0, 100, &sm, err, errlen) != 0 ||
            opt_int(p, "mem_util", pp, 0, 100, &mem, err, errlen) != 0)
            return -1;
        struct fake_process *fp = &d->processes[i];
        for (size_t j = 0; j < i; j++)
            if (d->processes[j].pid == (unsigned)pidv)
                return fail(err, errlen, "%s.pid: duplicate pid %lld on this device", pp, pidv);
        fp->pid = (unsigned)pidv;
        fp->used_mib = (unsigned long long)used;
        fp->sm_util = (unsigned)sm;
        fp->mem_util = (unsigned)mem;
        if (parse_instance_ids(p, pp, &fp->gi, &fp->ci, err, errlen) != 0)
            return -1;
        d->nprocesses = i + 1;
    }
    return 0;
}

static const char *const XID_KEYS[] = {"xid", "gpu_instance_id", "compute_instance_id", NULL};

static int parse_xids(const struct json_value *dev, const char *path, struct fake_device *d, char *err,
                      size_t errlen)
{
    const struct json_value *v = json_get(dev, "xid_events");
    if (!v)
        return 0;
    if (v->type != JSON_ARRAY)
        return fail(err, errlen, "%s.xid_events: expected an array, got %s (line %d)", path, type_name(v->type),
                    v->line);
    if (v->u.array.count > FAKE_MAX_XIDS)
        return fail(err, errlen, "%s.xid_events: more than %d entries", path, FAKE_MAX_XIDS);
    if (v->u.array.count == 0)
        return 0;
    d->xids = calloc(v->u.array.count, sizeof(*d->xids));
    if (!d->xids)
        return fail(err, errlen, "out of memory");
    for (size_t i = 0; i < v->u.array.count; i++) {
        const struct json_value *x = &v->u.array.items[i];
        struct fake_xid *fx = &d->xids[i];
        char xp[160];
        snprintf(xp, sizeof(xp), "%s.xid_events[%zu]", path, i);
        long long val;
        if (x->type == JSON_OBJECT) {
            if (check_keys(x, xp, XID_KEYS, err, errlen) != 0)
                return -1;
            const struct json_value *xv = json_get(x, "xid");
            if (!xv)
                return fail(err, errlen, "%s: missing required key \"xid\"", xp);
            char kp[192];
            snprintf(kp, sizeof(kp), "%s.xid", xp);
            if (get_int(xv, kp, 0, 0x7FFFFFFFFFFFFFFFLL, &val, err, errlen) != 0 ||
                parse_instance_ids(x, xp, &fx->gi, &fx->ci, err, errlen) != 0)
                return -1;
        } else {
            if (x->type != JSON_NUMBER)
                return fail(err, errlen, "%s: expected an integer XID or an object, got %s (line %d)", xp,
                            type_name(x->type), x->line);
            if (get_int(x, xp, 0, 0x7FFFFFFFFFFFFFFFLL, &val, err, errlen) != 0)
                return -1;
            fx->gi = fx->ci = FAKE_NO_INSTANCE;
        }
        fx->xid = (unsigned long long)val;
        d->nxids = i + 1;
    }
    return 0;
}

static const char *const DEVICE_KEYS[] = {
    "uuid", "name", "memory_total_mib", "memory_used_mib", "utilization_gpu", "utilization_memory", "minor",
    "pci_bus_id", "numa_node", "compute_capability", "mig_capable", "mig_mode", "processes", "xid_events",
    "ecc_dbe_events", "pci_device_id", "pci_subsystem_id", "errors", NULL};

static int parse_device(const struct json_value *v, size_t index, struct fake_device *d, char *err, size_t errlen)
{
    char path[64];
    snprintf(path, sizeof(path), "devices[%zu]", index);
    if (v->type != JSON_OBJECT)
        return fail(err, errlen, "%s: expected an object, got %s (line %d)", path, type_name(v->type), v->line);
    if (check_keys(v, path, DEVICE_KEYS, err, errlen) != 0)
        return -1;
    if (get_string(v, "uuid", path, 1, d->uuid, NVML_DEVICE_UUID_BUFFER_SIZE, err, errlen) != 0 ||
        get_string(v, "name", path, 1, d->name, NVML_DEVICE_NAME_BUFFER_SIZE, err, errlen) != 0)
        return -1;
    if (strncmp(d->uuid, "GPU-", 4) != 0 || strlen(d->uuid) < 5)
        return fail(err, errlen, "%s.uuid: \"%s\" must start with \"GPU-\"", path, d->uuid);
    if (!json_get(v, "memory_total_mib"))
        return fail(err, errlen, "%s: missing required key \"memory_total_mib\"", path);
    long long total = 0, used = 0, ug = 0, um = 0, minor = (long long)index, numa = -1, ecc = 0;
    if (opt_int(v, "memory_total_mib", path, 1, (long long)MIB_LIMIT, &total, err, errlen) != 0 ||
        opt_int(v, "memory_used_mib", path, 0, (long long)MIB_LIMIT, &used, err, errlen) != 0 ||
        opt_int(v, "utilization_gpu", path, 0, 100, &ug, err, errlen) != 0 ||
        opt_int(v, "utilization_memory", path, 0, 100, &um, err, errlen) != 0 ||
        opt_int(v, "minor", path, 0, 0x7FFFFFFF, &minor, err, errlen) != 0 ||
        opt_int(v, "ecc_dbe_events", path, 0, 0x7FFFFFFFFFFFFFFFLL, &ecc, err, errlen) != 0)
        return -1;
    const struct json_value *nv = json_get(v, "numa_node");
    if (nv && nv->type != JSON_NULL && opt_int(v, "numa_node", path, -1, 1023, &numa, err, errlen) != 0)
        return -1;
    d->memory_total_mib = (unsigned long long)total;
    d->memory_used_mib = (unsigned long long)used;
    d->utilization_gpu = (unsigned)ug;
    d->utilization_memory = (unsigned)um;
    d->minor = (unsigned)minor;
    d->numa_node = (int)numa;
    d->ecc_dbe_events = (unsigned long long)ecc;
    d->model = mig_model_for_name(d->name);

    char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    snprintf(bus_id, sizeof(bus_id), "00000000:%02zX:00.0", (0x07 + index) & 0xFF);
    if (get_string(v, "pci_bus_id", path, 0, bus_id, sizeof(bus_id), err, errlen) != 0)
        return -1;
    if (parse_bus_id(bus_id, &d->pci_domain, &d->pci_bus, &d->pci_device) != 0)
        return fail(err, errlen, "%s.pci_bus_id: \"%s\" is not of the form \"00000000:07:00.0\"", path, bus_id);

    long long devid = d->model ? d->model->pci_device_id : 0x10DE, subsys = 0;
    if (opt_int(v, "pci_device_id", path, 0, 0xFFFFFFFFLL, &devid, err, errlen) != 0 ||
        opt_int(v, "pci_subsystem_id", path, 0, 0xFFFFFFFFLL, &subsys, err, errlen) != 0)
        return -1;
    d->pci_device_id = (unsigned)devid;
    d->pci_subsystem_id = (unsigned)subsys;

    d->cc_major = (d->name[0] && (strstr(d->name, "H100") || strstr(d->name, "H200"))) ? 9 : 8;
    d->cc_minor = 0;
    const struct json_value *cc = json_get(v, "compute_capability");
    if (cc) {
        if (cc->type != JSON_ARRAY || cc->u.array.count != 2)
            return fail(err, errlen, "%s.compute_capability: expected [major, minor] (line %d)", path, cc->line);
        long long ma, mi;
        char kp[96];
        snprintf(kp, sizeof(kp), "%s.compute_capability[0]", path);
        if (get_int(&cc->u.array.items[0], kp, 0, 99, &ma, err, errlen) != 0)
            return -1;
        snprintf(kp, sizeof(kp), "%s.compute_capability[1]", path);
        if (get_int(&cc->u.array.items[1], kp, 0, 99, &mi, err, errlen) != 0)
            return -1;
        d->cc_major = (int)ma;
        d->cc_minor = (int)mi;
    }

    d->mig_capable = d->model != NULL;
    d->mig_mode = 0;
    if (opt_bool(v, "mig_capable", path, &d->mig_capable, err, errlen) != 0 ||
        opt_bool(v, "mig_mode", path, &d->mig_mode, err, errlen) != 0)
        return -1;
    if (d->mig_capable && !d->model)
        return fail(err, errlen,
                    "%s.mig_capable: true, but \"%s\" has no built-in MIG profile table "
                    "(known: A30, A100-SXM4-40GB, A100-SXM4-80GB, H100 80GB HBM3, H200 141GB)",
                    path, d->name);
    if (d->mig_mode && !d->mig_capable)
        return fail(err, errlen, "%s.mig_mode: true on a device that is not MIG-capable", path);
    if (!d->mig_capable)
        d->model = NULL;

    if (parse_processes(v, path, d, err, errlen) != 0 || parse_xids(v, path, d, err, errlen) != 0 ||
        parse_errors(v, path, &d->errors, err, errlen) != 0)
        return -1;
    return 0;
}

static const char *const TOP_KEYS[] = {"driver_version", "cuda_driver_version", "nvml_version", "devices", "errors",
                                       NULL};

int fake_config_parse(const char *text, size_t len, struct fake_config *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    struct json_doc doc;
    if (json_parse(text, len, &doc, err, errlen) != 0)
        return -1;
    int rc = -1;
    const struct json_value *root = doc.root;
    if (root->type != JSON_OBJECT) {
        fail(err, errlen, "the top level must be an object, got %s", type_name(root->type));
        goto done;
    }
    if (check_keys(root, "top level", TOP_KEYS, err, errlen) != 0)
        goto done;
    snprintf(out->driver_version, sizeof(out->driver_version), "550.54.15");
    if (get_string(root, "driver_version", "top level", 0, out->driver_version, sizeof(out->driver_version), err,
                   errlen) != 0)
        goto done;
    snprintf(out->nvml_version, sizeof(out->nvml_version), "12.%.70s", out->driver_version);
    if (get_string(root, "nvml_version", "top level", 0, out->nvml_version, sizeof(out->nvml_version), err,
                   errlen) != 0)
        goto done;
    long long cuda = 12040;
    if (opt_int(root, "cuda_driver_version", "top level", 1000, 999999, &cuda, err, errlen) != 0)
        goto done;
    out->cuda_driver_version = (int)cuda;
    if (parse_errors(root, "top level", &out->errors, err, errlen) != 0)
        goto done;
    const struct json_value *devs = json_get(root, "devices");
    if (!devs) {
        fail(err, errlen, "top level: missing required key \"devices\"");
        goto done;
    }
    if (devs->type != JSON_ARRAY) {
        fail(err, errlen, "devices: expected an array, got %s (line %d)", type_name(devs->type), devs->line);
        goto done;
    }
    if (devs->u.array.count > FAKE_MAX_DEVICES) {
        fail(err, errlen, "devices: more than %d devices", FAKE_MAX_DEVICES);
        goto done;
    }
    if (devs->u.array.count) {
        out->devices = calloc(devs->u.array.count, sizeof(*out->devices));
        if (!out->devices) {
            fail(err, errlen, "out of memory");
            goto done;
        }
    }
    for (size_t i = 0; i < devs->u.array.count; i++) {
        out->ndevices = i + 1; /* so that fake_config_free releases partial devices */
        if (parse_device(&devs->u.array.items[i], i, &out->devices[i], err, errlen) != 0)
            goto done;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(out->devices[j].uuid, out->devices[i].uuid) == 0) {
                fail(err, errlen, "devices[%zu].uuid: duplicate of devices[%zu].uuid \"%s\"", i, j,
                     out->devices[i].uuid);
                goto done;
            }
        }
    }
    rc = 0;
done:
    json_free(&doc);
    if (rc != 0)
        fake_config_free(out);
    return rc;
}

void fake_config_free(struct fake_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->ndevices && cfg->devices; i++) {
        free(cfg->devices[i].processes);
        free(cfg->devices[i].xids);
    }
    free(cfg->devices);
    memset(cfg, 0, sizeof(*cfg));
}

char *fake_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fail(err, errlen, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fail(err, errlen, "not a regular file");
        close(fd);
        return NULL;
    }
    if ((unsigned long long)st.st_size > max) {
        fail(err, errlen, "file is larger than %zu bytes", max);
        close(fd);
        return NULL;
    }
    size_t cap = (size_t)st.st_size + 2, n = 0; /* one spare byte sees EOF without growing */
    char *buf = malloc(cap);
    if (!buf) {
        fail(err, errlen, "out of memory");
        close(fd);
        return NULL;
    }
    for (;;) {
        if (n == cap - 1) {
            /* The file grew while we read it; allow up to max. */
            if (cap - 1 >= max) {
                fail(err, errlen, "file is larger than %zu bytes", max);
                free(buf);
                close(fd);
                return NULL;
            }
            size_t ncap = (cap - 1) * 2 + 2 > max + 1 ? max + 1 : (cap - 1) * 2 + 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                fail(err, errlen, "out of memory");
                free(buf);
                close(fd);
                return NULL;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            fail(err, errlen, "read failed: %s", strerror(errno));
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *len = n;
    return buf;
}
