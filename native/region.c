/*
 * pread-only reader of HAMi-core shared-region files (see region.h for why no mmap).
 *
 * One call, vgpu_region_read(), decodes a file in phases (one static function each):
 *   1. read_layout_and_tail: the layout from the size: fstat, or (given the previous read's
 *      layout as a hint) a tail read that asks for one byte past the end and so proves the size
 *      without an fstat; the tail (proc_num ... end) sizes the first batch of slots;
 *   2. read_header: one preadv of the header (up to `procs`) together with the first batch of up
 *      to 8 slots (for v1.x only that batch's seqlock words: s1), then magic and version;
 *   3. decode_header / 4. decode_devices: the header and tail fields, the device section;
 *   5. read_live_slots: the live prefix procs[0, proc_num) in batches of 8 slots, one pread per
 *      batch, and under the v1.2 seqlock one preadv of the batch's seqlock words before (s1) and
 *      after (s2) it (read_batch); live slots are summed per device (add_slot).  A slot caught
 *      mid-write is re-read alone, within two caps (VGPU_REGION_SEQLOCK_RETRIES per slot,
 *      VGPU_REGION_READ_RETRIES per read), then skipped: a file whose seqlocks never settle
 *      cannot make a read cost more than a few hundred microseconds.
 * A v1.2 file with up to 8 live slots costs 4 reads, the other layouts 2 (plus an fstat when the
 * layout is new or changed).  The cost grows with the live slots, not with the 1,024 capacity.
 *
 * There is no global mutable state: the layout table is const.
 */
#define _GNU_SOURCE
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "HAMi-core regions are little-endian x86-64 files");

typedef struct {
    int32_t layout;
    const char *name;
    uint64_t struct_size; /* file size = struct_size + 1 */
    int has_version, has_util, has_last_kernel, has_slot_seqlock;
    size_t off_sm_init, off_device_num, off_uuids, off_limit, off_sm_limit, off_procs;
    size_t slot_size, slot_used, used_size, slot_monitorused, slot_util, util_size, slot_status, slot_seqlock;
    size_t off_proc_num, off_util_switch, off_recent_kernel, off_priority, off_last_kernel;
} layout_desc_t;

#define COMMON(region_t, slot_t)                                                            \
    .struct_size = sizeof(region_t), .off_sm_init = offsetof(region_t, sm_init_flag),        \
    .off_device_num = offsetof(region_t, device_num), .off_uuids = offsetof(region_t, uuids), \
    .off_limit = offsetof(region_t, limit), .off_sm_limit = offsetof(region_t, sm_limit),    \
    .off_procs = offsetof(region_t, procs), .slot_size = sizeof(slot_t),                    \
    .slot_used = offsetof(slot_t, used), .slot_monitorused = offsetof(slot_t, monitorused),  \
    .slot_status = offsetof(slot_t, status), .off_proc_num = offsetof(region_t, proc_num),  \
    .off_util_switch = offsetof(region_t, utilization_switch),                              \
    .off_recent_kernel = offsetof(region_t, recent_kernel),                                 \
    .off_priority = offsetof(region_t, priority)

static const layout_desc_t LAYOUTS[] = {
    {.layout = VGPU_REGION_LAYOUT_ORIGINAL, .name = "original",
     COMMON(vgpu_region_original_t, vgpu_slot_original_t), .used_size = sizeof(vgpu_devmem_v0_t)},
    {.layout = VGPU_REGION_LAYOUT_V0, .name = "v0", .has_util = 1,
     COMMON(vgpu_region_v0_t, vgpu_slot_v0_t), .used_size = sizeof(vgpu_devmem_v0_t),
     .slot_util = offsetof(vgpu_slot_v0_t, device_util), .util_size = sizeof(vgpu_devutil_v0_t)},
    {.layout = VGPU_REGION_LAYOUT_V1, .name = "v1.x", .has_version = 1, .has_util = 1, .has_last_kernel = 1,
     .has_slot_seqlock = 1, COMMON(vgpu_region_v1_t, vgpu_slot_v1_t), .used_size = sizeof(vgpu_devmem_v1_t),
     .slot_util = offsetof(vgpu_slot_v1_t, device_util), .util_size = sizeof(vgpu_devutil_v1_t),
     .slot_seqlock = offsetof(vgpu_slot_v1_t, seqlock),
     .off_last_kernel = offsetof(vgpu_region_v1_t, last_kernel_time)},
    {.layout = VGPU_REGION_LAYOUT_INTERIM, .name = "interim", .has_version = 1, .has_util = 1,
     .has_last_kernel = 1, .has_slot_seqlock = 1, COMMON(vgpu_region_interim_t, vgpu_slot_interim_t),
     .used_size = sizeof(vgpu_devmem_v1_t), .slot_util = offsetof(vgpu_slot_interim_t, device_util),
     .util_size = sizeof(vgpu_devutil_v1_t), .slot_seqlock = offsetof(vgpu_slot_interim_t, seqlock),
     .off_last_kernel = offsetof(vgpu_region_interim_t, last_kernel_time)},
};
#undef COMMON

#define NLAYOUTS (sizeof(LAYOUTS) / sizeof(LAYOUTS[0]))
#define MAX_HEADER 1888 /* largest `procs` offset (interim) */
#define MAX_TAIL 64     /* largest tail: interim, 2,008,984 - 2,008,928 = 56 */
#define MAX_SLOT 1960
#define CHUNK_SLOTS 8 /* slots per batched pread: 8 x 1960 B stays a small stack buffer */

static int fail(vgpu_region_error_t *err, int32_t code, int sys_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(vgpu_region_error_t *err, int32_t code, int sys_errno, const char *fmt, ...) {
    if (err) {
        va_list ap;
        err->code = code;
        err->sys_errno = sys_errno;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void clear_error(vgpu_region_error_t *err) {
    if (err) {
        err->code = VGPU_REGION_OK;
        err->sys_errno = 0;
        err->message[0] = '\0';
    }
}

static const layout_desc_t *layout_by_file_size(uint64_t size) {
    for (size_t i = 0; i < NLAYOUTS; i++)
        if (LAYOUTS[i].struct_size + 1 == size) return &LAYOUTS[i];
    return NULL;
}

static const layout_desc_t *layout_by_code(int32_t code) {
    for (size_t i = 0; i < NLAYOUTS; i++)
        if (LAYOUTS[i].layout == code) return &LAYOUTS[i];
    return NULL;
}

static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

static inline int32_t rd_i32(const unsigned char *p) { int32_t v; memcpy(&v, p, 4); return v; }
static inline uint32_t rd_u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t rd_u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static inline uint64_t sat_add(uint64_t a, uint64_t b, uint32_t *anomalies) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        *anomalies |= VGPU_REGION_A_SUM_SATURATED;
        return UINT64_MAX;
    }
    return r;
}

typedef struct {
    uint32_t preads;
    uint64_t bytes;
} io_count_t;

/* pread exactly `len` bytes at `off`; EOF before that is E_SHORT_READ (the file shrank). */
static int pread_full(int fd, void *buf, size_t len, off_t off, io_count_t *io, vgpu_region_error_t *err) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
        if (io) io->preads++;
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            return fail(err, VGPU_REGION_E_IO, e, "pread of %zu bytes at offset %lld failed: %s", len,
                        (long long)off, strerror(e));
        }
        if (n == 0)
            return fail(err, VGPU_REGION_E_SHORT_READ, 0,
                        "file ended at offset %lld while reading %zu bytes at offset %lld (it shrank)",
                        (long long)(off + (off_t)done), len, (long long)off);
        done += (size_t)n;
        if (io) io->bytes += (uint64_t)n;
    }
    return 0;
}

/* fstat: a regular file of one of the four known sizes (the only reliable layout key). */
static const layout_desc_t *stat_layout(int fd, uint64_t *file_size, vgpu_region_error_t *err) {
    struct stat st;
    if (fd < 0) {
        fail(err, VGPU_REGION_E_ARG, 0, "invalid file descriptor %d", fd);
        return NULL;
    }
    if (fstat(fd, &st) < 0) {
        int e = errno;
        fail(err, VGPU_REGION_E_IO, e, "fstat failed: %s", strerror(e));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        fail(err, VGPU_REGION_E_NOT_REGULAR, 0, "is %s, not a regular file", file_kind(st.st_mode));
        return NULL;
    }
    const layout_desc_t *L = layout_by_file_size((uint64_t)st.st_size);
    if (!L) {
        fail(err, VGPU_REGION_E_SIZE, 0,
             "size %lld bytes is not a HAMi-core region size (804681 original, 1197897 v0, "
             "2008953 v1.x, 2008985 interim)",
             (long long)st.st_size);
        return NULL;
    }
    *file_size = (uint64_t)st.st_size;
    return L;
}

/* Magic, then (v1.x/interim) the major version.  Checked in the order of docs/hami-core.md §4.2: size, magic, version. */
static int check_header(const layout_desc_t *L, const unsigned char *hdr, uint32_t *major, uint32_t *minor,
                        vgpu_region_error_t *err) {
    int32_t magic = rd_i32(hdr);
    if (magic == 0)
        return fail(err, VGPU_REGION_E_UNINITIALISED, 0, "magic not set yet (%s-sized file still being initialised)",
                    L->name);
    if (magic != VGPU_REGION_MAGIC)
        return fail(err, VGPU_REGION_E_MAGIC, 0, "magic %d (0x%08x) is not %d (0x%08x)", magic, (uint32_t)magic,
                    VGPU_REGION_MAGIC, VGPU_REGION_MAGIC);
    *major = *minor = 0;
    if (L->has_version) {
        *major = rd_u32(hdr + offsetof(vgpu_region_v1_t, major_version));
        *minor = rd_u32(hdr + offsetof(vgpu_region_v1_t, minor_version));
        if (*major != 1)
            return fail(err, VGPU_REGION_E_VERSION, 0, "major_version %u in a %s-sized file (expected 1)", *major,
                        L->name);
    }
    return 0;
}

/* stat_layout + header pread + check_header, for the single-purpose entry points. */
static const layout_desc_t *validate(int fd, unsigned char *hdr, uint64_t *file_size, uint32_t *major,
                                     uint32_t *minor, io_count_t *io, vgpu_region_error_t *err) {
    const layout_desc_t *L = stat_layout(fd, file_size, err);
    if (!L) return NULL;
    if (pread_full(fd, hdr, L->off_procs, 0, io, err) < 0) return NULL;
    if (check_header(L, hdr, major, minor, err) < 0) return NULL;
    return L;
}

/* Whether the slots of this file are written under their seqlock: v1.2 and later (an unknown
 * minor reads as v1.2), and the interim layout, whose seqlock sits right after hostpid. */
static int slots_seqlocked(const layout_desc_t *L, uint32_t minor) {
    return L->layout == VGPU_REGION_LAYOUT_INTERIM || (L->layout == VGPU_REGION_LAYOUT_V1 && minor >= 2);
}

/* Copy slot `i` into `slot`; under the seqlock when `seqlocked`, with at most
 * VGPU_REGION_SEQLOCK_RETRIES tries, each also taken from `*budget` (the read's remaining
 * retries; NULL: no shared budget).  Returns 1 when read, 0 when the seqlock did not settle
 * within the caps (skip the slot this time), -1 on error. */
static int read_slot_raw(int fd, const layout_desc_t *L, int seqlocked, uint32_t i, unsigned char *slot,
                         int *budget, io_count_t *io, vgpu_region_error_t *err) {
    off_t base = (off_t)(L->off_procs + (size_t)i * L->slot_size);
    if (!seqlocked) return pread_full(fd, slot, L->slot_size, base, io, err) < 0 ? -1 : 1;
    off_t seq_off = base + (off_t)L->slot_seqlock;
    for (int tries = 0; tries < VGPU_REGION_SEQLOCK_RETRIES; tries++) {
        unsigned char b[8];
        if (budget) {
            if (*budget <= 0) return 0;
            (*budget)--;
        }
        if (tries) sched_yield();
        if (pread_full(fd, b, 8, seq_off, io, err) < 0) return -1;
        uint64_t s1 = rd_u64(b);
        if (s1 & 1) continue;
        if (pread_full(fd, slot, L->slot_size, base, io, err) < 0) return -1;
        if (pread_full(fd, b, 8, seq_off, io, err) < 0) return -1;
        if (rd_u64(b) == s1) return 1;
    }
    return 0;
}

/* One preadv of exactly `want` bytes at `off`; a short transfer means the file shrank. */
static int preadv_exact(int fd, const struct iovec *iov, int k, size_t want, off_t off, io_count_t *io,
                        vgpu_region_error_t *err) {
    for (;;) {
        ssize_t got = preadv(fd, iov, k, off);
        if (io) io->preads++;
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            return fail(err, VGPU_REGION_E_IO, e, "preadv of %zu bytes at offset %lld failed: %s", want,
                        (long long)off, strerror(e));
        }
        if ((size_t)got != want)
            return fail(err, VGPU_REGION_E_SHORT_READ, 0,
                        "file ended while reading %zu bytes at offset %lld (it shrank)", want, (long long)off);
        if (io) io->bytes += (uint64_t)got;
        return 0;
    }
}

/* iovecs that scatter slots [first, first + n) so that only their seqlock words land in `seq`;
 * everything else goes to `scratch` (contents discarded).  Returns the number of iovecs. */
static int seq_iov(const layout_desc_t *L, uint32_t n, uint64_t *seq, unsigned char *scratch, struct iovec *iov) {
    int k = 0;
    size_t before = L->slot_seqlock, after = L->slot_size - L->slot_seqlock - 8;
    for (uint32_t i = 0; i < n; i++) {
        if (before) iov[k++] = (struct iovec){scratch, before};
        iov[k++] = (struct iovec){&seq[i], 8};
        if (after) iov[k++] = (struct iovec){scratch, after};
    }
    return k;
}

/* The seqlock words of slots [first, first + n) in ONE preadv. */
static int pread_seqlocks(int fd, const layout_desc_t *L, uint32_t first, uint32_t n, uint64_t *seq,
                          io_count_t *io, vgpu_region_error_t *err) {
    unsigned char scratch[MAX_SLOT];
    struct iovec iov[3 * CHUNK_SLOTS];
    int k = seq_iov(L, n, seq, scratch, iov);
    return preadv_exact(fd, iov, k, (size_t)n * L->slot_size,
                        (off_t)(L->off_procs + (size_t)first * L->slot_size), io, err);
}

/* Decode pid/hostpid/status/seqlock and the counters of devices [0, ndev). */
static void decode_slot(const layout_desc_t *L, const unsigned char *slot, uint32_t ndev, vgpu_region_slot_t *out) {
    out->pid = rd_i32(slot);
    out->hostpid = rd_i32(slot + 4);
    out->status = rd_i32(slot + L->slot_status);
    out->in_use = out->pid != 0 && out->status != 0;
    out->seqlock = L->has_slot_seqlock ? rd_u64(slot + L->slot_seqlock) : 0;
    for (uint32_t d = 0; d < ndev && d < VGPU_REGION_MAX_DEVICES; d++) {
        const unsigned char *u = slot + L->slot_used + (size_t)d * L->used_size;
        vgpu_region_slot_device_t *o = &out->devices[d];
        o->context_size = rd_u64(u + offsetof(vgpu_devmem_v0_t, context_size));
        o->module_size = rd_u64(u + offsetof(vgpu_devmem_v0_t, module_size));
        o->data_size = rd_u64(u + offsetof(vgpu_devmem_v0_t, data_size));
        o->offset = rd_u64(u + offsetof(vgpu_devmem_v0_t, offset));
        o->total = rd_u64(u + offsetof(vgpu_devmem_v0_t, total));
        o->monitor_used = rd_u64(slot + L->slot_monitorused + (size_t)d * 8);
        o->sm_util = L->has_util
                         ? rd_u64(slot + L->slot_util + (size_t)d * L->util_size + offsetof(vgpu_devutil_v0_t, sm_util))
                         : 0;
    }
}

static int uuid_state(const char *raw, char *copy) {
    const void *nul = memchr(raw, 0, VGPU_REGION_UUID_LEN);
    copy[0] = '\0';
    if (raw[0] == 0) return VGPU_REGION_UUID_EMPTY;
    if (!nul) return VGPU_REGION_UUID_INVALID;
    size_t n = (size_t)((const char *)nul - raw);
    for (size_t k = 0; k < n; k++)
        if ((unsigned char)raw[k] < 0x20 || (unsigned char)raw[k] > 0x7e) return VGPU_REGION_UUID_INVALID;
    memcpy(copy, raw, n + 1);
    return VGPU_REGION_UUID_VALID;
}

/* ------------------------------------------------------------------ vgpu_region_read, in phases */

/* Buffers of one read, never initialised: every byte used is read from the file first. */
typedef struct {
    unsigned char hdr[MAX_HEADER];          /* the header, up to `procs` */
    unsigned char tail[MAX_TAIL + 2];       /* proc_num ... end, plus the hinted read's probe byte */
    unsigned char slot_buf[MAX_SLOT];       /* one slot re-read alone; also the seqlock scatter scratch */
    unsigned char chunk[CHUNK_SLOTS * MAX_SLOT]; /* the current batch of slots */
    uint64_t s1[CHUNK_SLOTS], s2[CHUNK_SLOTS];   /* the batch's seqlock words before / after it */
} read_bufs_t;

/* What the phases of one read hand each other. */
typedef struct {
    int fd;
    const layout_desc_t *L;
    uint64_t file_size;
    int first_chunk_loaded;                 /* chunk holds the first batch (header read) */
    int first_s1_loaded;                    /* s1 holds the first batch's seqlock words (header read) */
    int retries_left;                       /* slot re-reads this read may still make */
    io_count_t io;
    read_bufs_t *b;
} region_read_t;

/* The tail read under the hinted layout: 1 when it proved the file still has that layout's
 * size (asking for one byte past the file's last byte returns exactly tail + 1 bytes only
 * then), 0 otherwise. */
static int read_hinted_tail(region_read_t *r, int32_t layout_hint) {
    const layout_desc_t *H = layout_by_code(layout_hint);
    if (!H) return 0;
    size_t want = H->struct_size - H->off_proc_num + 1;
    ssize_t got;
    do got = pread(r->fd, r->b->tail, want + 1, (off_t)H->off_proc_num);
    while (got < 0 && errno == EINTR);
    r->io.preads++;
    if (got != (ssize_t)want) return 0;
    r->L = H;
    r->file_size = H->struct_size + 1;
    r->io.bytes += (uint64_t)got;
    return 1;
}

/* Phase 1: the layout and the tail (proc_num ... end), which sizes the first batch of slots.
 * With the previous read's layout as a hint the tail read proves the size; otherwise (and
 * without a hint) fstat decides, as on first sight. */
static int read_layout_and_tail(region_read_t *r, int32_t layout_hint, vgpu_region_error_t *err) {
    if (r->fd >= 0 && layout_hint && read_hinted_tail(r, layout_hint)) return 0;
    r->L = stat_layout(r->fd, &r->file_size, err);
    if (!r->L) return -1;
    return pread_full(r->fd, r->b->tail, r->L->struct_size - r->L->off_proc_num, (off_t)r->L->off_proc_num,
                      &r->io, err);
}

/* proc_num_raw clamped to [0, VGPU_REGION_MAX_PROCS]. */
static uint32_t clamp_proc_num(int32_t raw) {
    return raw < 0 ? 0 : raw > VGPU_REGION_MAX_PROCS ? VGPU_REGION_MAX_PROCS : (uint32_t)raw;
}

/* Phase 2: the header together with the first batch of up to 8 slots in one preadv: the layouts
 * with a slot seqlock (v1.x, seqlocked from 1.2 on, and interim) get the batch's seqlock words
 * (s1), the other layouts the batch itself.  Then the header checks: magic, version. */
static int read_header(region_read_t *r, uint32_t proc_num, uint32_t *major, uint32_t *minor,
                       vgpu_region_error_t *err) {
    const layout_desc_t *L = r->L;
    read_bufs_t *b = r->b;
    uint32_t n0 = proc_num < CHUNK_SLOTS ? proc_num : CHUNK_SLOTS;
    struct iovec iov[1 + 3 * CHUNK_SLOTS];
    int k = 0;
    iov[k++] = (struct iovec){b->hdr, L->off_procs};
    if (n0 && L->has_slot_seqlock) {
        k += seq_iov(L, n0, b->s1, b->slot_buf, iov + k);
        r->first_s1_loaded = 1;
    } else if (n0) {
        iov[k++] = (struct iovec){b->chunk, (size_t)n0 * L->slot_size};
        r->first_chunk_loaded = 1;
    }
    if (preadv_exact(r->fd, iov, k, L->off_procs + (size_t)n0 * L->slot_size, 0, &r->io, err) < 0) return -1;
    return check_header(L, b->hdr, major, minor, err);
}

/* Phase 3: the header and tail fields of the summary, with their anomalies. */
static void decode_header(const region_read_t *r, uint32_t major, uint32_t minor, int32_t proc_num_raw,
                          vgpu_region_summary_t *out) {
    const layout_desc_t *L = r->L;
    const unsigned char *hdr = r->b->hdr, *tail = r->b->tail;
    out->layout = L->layout;
    out->major_version = major;
    out->minor_version = minor;
    out->file_size = r->file_size;
    out->has_util = L->has_util;
    out->has_last_kernel = L->has_last_kernel;
    if (L->layout == VGPU_REGION_LAYOUT_V1) {
        if (minor != 1 && minor != 2) out->anomalies |= VGPU_REGION_A_UNKNOWN_MINOR;
    }
    out->seqlocked = slots_seqlocked(L, minor);
    out->sm_init_flag = rd_i32(hdr + L->off_sm_init);
    out->device_num_raw = rd_u64(hdr + L->off_device_num);
    out->device_num = out->device_num_raw > VGPU_REGION_MAX_DEVICES ? VGPU_REGION_MAX_DEVICES
                                                                      : (uint32_t)out->device_num_raw;
    if (out->device_num_raw > VGPU_REGION_MAX_DEVICES) out->anomalies |= VGPU_REGION_A_DEVICE_NUM_CLAMPED;

    out->proc_num_raw = proc_num_raw;
    out->proc_num = clamp_proc_num(proc_num_raw);
    if (proc_num_raw < 0) out->anomalies |= VGPU_REGION_A_PROC_NUM_NEGATIVE;
    else if (proc_num_raw > VGPU_REGION_MAX_PROCS) out->anomalies |= VGPU_REGION_A_PROC_NUM_CLAMPED;
    out->utilization_switch = rd_i32(tail + (L->off_util_switch - L->off_proc_num));
    out->recent_kernel = rd_i32(tail + (L->off_recent_kernel - L->off_proc_num));
    out->priority = rd_i32(tail + (L->off_priority - L->off_proc_num));
    if (L->has_last_kernel) out->last_kernel_time = rd_u64(tail + (L->off_last_kernel - L->off_proc_num));
}

/* Phase 4: the device section: limits of all 16 devices, UUIDs of the first device_num. */
static void decode_devices(const region_read_t *r, vgpu_region_summary_t *out) {
    const layout_desc_t *L = r->L;
    const unsigned char *hdr = r->b->hdr;
    for (int d = 0; d < VGPU_REGION_MAX_DEVICES; d++) {
        out->limit[d] = rd_u64(hdr + L->off_limit + (size_t)d * 8);
        out->sm_limit[d] = rd_u64(hdr + L->off_sm_limit + (size_t)d * 8);
    }
    for (uint32_t d = 0; d < out->device_num; d++) {
        vgpu_region_device_t *dev = &out->devices[d];
        dev->uuid_state = uuid_state((const char *)hdr + L->off_uuids + (size_t)d * VGPU_REGION_UUID_LEN, dev->uuid);
        if (dev->uuid_state == VGPU_REGION_UUID_INVALID) out->anomalies |= VGPU_REGION_A_BAD_UUID;
        dev->limit = out->limit[d];
        dev->sm_limit = out->sm_limit[d];
    }
}

/* A live slot's counters added to its devices' sums (saturating); a free slot is skipped. */
static void add_slot(const layout_desc_t *L, const unsigned char *slot, vgpu_region_summary_t *out) {
    vgpu_region_slot_t s;
    /* Liveness first: most of a slot is counters. */
    if (rd_i32(slot) == 0 || rd_i32(slot + L->slot_status) == 0) return;
    decode_slot(L, slot, out->device_num, &s);
    out->live_procs++;
    for (uint32_t d = 0; d < out->device_num; d++) {
        vgpu_region_device_t *dev = &out->devices[d];
        const vgpu_region_slot_device_t *u = &s.devices[d];
        dev->used_total = sat_add(dev->used_total, u->total, &out->anomalies);
        dev->used_context = sat_add(dev->used_context, u->context_size, &out->anomalies);
        dev->used_module = sat_add(dev->used_module, u->module_size, &out->anomalies);
        dev->used_data = sat_add(dev->used_data, u->data_size, &out->anomalies);
        dev->used_offset = sat_add(dev->used_offset, u->offset, &out->anomalies);
        dev->monitor_used = sat_add(dev->monitor_used, u->monitor_used, &out->anomalies);
        dev->sm_util = sat_add(dev->sm_util, u->sm_util, &out->anomalies);
        if (u->total > 0) dev->procs++;
    }
}

/* Phase 5, one batch: slots [first, first + n), n <= 8, in one pread; under the seqlock the
 * batch's seqlock words are read before (s1) and after (s2) it, each in one preadv.  A slot
 * whose s1 is odd or differs from s2 was being written: it is re-read alone within the retry
 * caps, and skipped (counted) when it does not settle.  The first batch may come with the header. */
static int read_batch(region_read_t *r, uint32_t first, uint32_t n, vgpu_region_summary_t *out,
                      vgpu_region_error_t *err) {
    const layout_desc_t *L = r->L;
    read_bufs_t *b = r->b;
    int s1_loaded = first == 0 && r->first_s1_loaded, loaded = first == 0 && r->first_chunk_loaded;
    if (out->seqlocked && !s1_loaded && pread_seqlocks(r->fd, L, first, n, b->s1, &r->io, err) < 0) return -1;
    if (!loaded && pread_full(r->fd, b->chunk, (size_t)n * L->slot_size,
                              (off_t)(L->off_procs + (size_t)first * L->slot_size), &r->io, err) < 0)
        return -1;
    if (out->seqlocked && pread_seqlocks(r->fd, L, first, n, b->s2, &r->io, err) < 0) return -1;
    for (uint32_t j = 0; j < n; j++) {
        const unsigned char *slot = b->chunk + (size_t)j * L->slot_size;
        if (out->seqlocked && ((b->s1[j] & 1) || b->s1[j] != b->s2[j])) {
            int got = read_slot_raw(r->fd, L, 1, first + j, b->slot_buf, &r->retries_left, &r->io, err);
            if (got < 0) return -1;
            if (got == 0) {
                out->skipped_slots++;
                out->anomalies |= VGPU_REGION_A_SLOT_SKIPPED;
                continue;
            }
            slot = b->slot_buf;
        }
        add_slot(L, slot, out);
    }
    return 0;
}

/* Phase 5: the live prefix procs[0, proc_num) in batches of CHUNK_SLOTS. */
static int read_live_slots(region_read_t *r, vgpu_region_summary_t *out, vgpu_region_error_t *err) {
    for (uint32_t first = 0; first < out->proc_num; first += CHUNK_SLOTS) {
        uint32_t n = out->proc_num - first < CHUNK_SLOTS ? out->proc_num - first : CHUNK_SLOTS;
        if (read_batch(r, first, n, out, err) < 0) return -1;
    }
    return 0;
}

int vgpu_region_read(int fd, int32_t layout_hint, vgpu_region_summary_t *out, vgpu_region_error_t *err) {
    read_bufs_t bufs;
    region_read_t r = {.fd = fd, .b = &bufs, .retries_left = VGPU_REGION_READ_RETRIES};
    uint32_t major, minor;

    clear_error(err);
    if (!out) return fail(err, VGPU_REGION_E_ARG, 0, "no output buffer");
    /* Only what this read fills: the fields before devices[], then devices[0, device_num)
     * (the rest of the 3.3 KB struct is never read; clearing it cost as much as a pread). */
    memset(out, 0, offsetof(vgpu_region_summary_t, devices));
    if (read_layout_and_tail(&r, layout_hint, err) < 0) return -1;
    int32_t proc_num_raw = rd_i32(bufs.tail);
    if (read_header(&r, clamp_proc_num(proc_num_raw), &major, &minor, err) < 0) return -1;
    decode_header(&r, major, minor, proc_num_raw, out);
    memset(out->devices, 0, (size_t)out->device_num * sizeof out->devices[0]);
    decode_devices(&r, out);
    if (read_live_slots(&r, out, err) < 0) return -1;
    out->preads = r.io.preads;
    out->bytes_read = r.io.bytes;
    return 0;
}

int vgpu_region_read_slot(int fd, uint32_t index, vgpu_region_slot_t *out, vgpu_region_error_t *err) {
    unsigned char hdr[MAX_HEADER], slot[MAX_SLOT];
    uint64_t file_size;
    uint32_t major, minor;

    clear_error(err);
    if (!out) return fail(err, VGPU_REGION_E_ARG, 0, "no output buffer");
    memset(out, 0, sizeof *out);
    if (index >= VGPU_REGION_MAX_PROCS)
        return fail(err, VGPU_REGION_E_ARG, 0, "slot index %u is out of range [0, %d)", index, VGPU_REGION_MAX_PROCS);
    const layout_desc_t *L = validate(fd, hdr, &file_size, &major, &minor, NULL, err);
    if (!L) return -1;
    int r = read_slot_raw(fd, L, slots_seqlocked(L, minor), index, slot, NULL, NULL, err);
    if (r < 0) return -1;
    if (r == 0) {
        out->consistent = 0;
        return 0;
    }
    decode_slot(L, slot, VGPU_REGION_MAX_DEVICES, out);
    out->consistent = 1;
    return 0;
}

/* The open rule (docs/hami-core.md §8): the name is resolved once, to an O_PATH descriptor,
 * which opens nothing for I/O (no device driver's open, no FIFO rendezvous, no IN_OPEN), and
 * without following a final symlink; fstat of that descriptor decides; only a regular file is
 * then opened for I/O, through /proc/self/fd/N, i.e. the verified inode itself and never the name
 * again, which the container may have pointed elsewhere meanwhile. */
int vgpu_region_open(int dirfd, const char *path, int writable, vgpu_region_error_t *err) {
    struct stat pre, post;
    char self_fd[sizeof "/proc/self/fd/" + 3 * sizeof(int)];
    clear_error(err);
    if (!path || !*path) return fail(err, VGPU_REGION_E_ARG, 0, "empty path");
    if (dirfd < 0) dirfd = AT_FDCWD;
    int pfd = openat(dirfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0) {
        int e = errno;
        if (e == ENOENT) return fail(err, VGPU_REGION_E_NOT_FOUND, e, "does not exist");
        return fail(err, VGPU_REGION_E_OPEN, e, "cannot resolve: %s", strerror(e));
    }
    if (fstat(pfd, &pre) < 0) {
        int e = errno;
        close(pfd);
        return fail(err, VGPU_REGION_E_IO, e, "fstat failed: %s", strerror(e));
    }
    if (!S_ISREG(pre.st_mode)) {
        close(pfd);
        if (S_ISLNK(pre.st_mode)) return fail(err, VGPU_REGION_E_SYMLINK, 0, "is a symbolic link (never followed)");
        return fail(err, VGPU_REGION_E_NOT_REGULAR, 0, "is %s, not a regular file", file_kind(pre.st_mode));
    }
    snprintf(self_fd, sizeof self_fd, "/proc/self/fd/%d", pfd);
    int fd = open(self_fd, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    int e = errno;
    close(pfd);
    if (fd < 0) {
        if (e == ENOENT)
            return fail(err, VGPU_REGION_E_OPEN, e, "cannot reopen the verified file through %s (is /proc mounted?)",
                        "/proc/self/fd");
        return fail(err, VGPU_REGION_E_OPEN, e, "cannot open %s: %s", writable ? "read-write" : "read-only",
                    strerror(e));
    }
    if (fstat(fd, &post) < 0) {
        e = errno;
        close(fd);
        return fail(err, VGPU_REGION_E_IO, e, "fstat failed: %s", strerror(e));
    }
    /* Cannot differ (the reopen is of the inode, not of a name); checked all the same. */
    if (!S_ISREG(post.st_mode) || post.st_dev != pre.st_dev || post.st_ino != pre.st_ino) {
        close(fd);
        return fail(err, VGPU_REGION_E_RACE, 0, "was replaced while being opened");
    }
    return fd;
}

int vgpu_region_write_feedback(int fd, int32_t expected_layout, int32_t field, int32_t value,
                               vgpu_region_error_t *err) {
    unsigned char hdr[MAX_HEADER], b[4];
    uint64_t file_size;
    uint32_t major, minor;

    clear_error(err);
    const layout_desc_t *want = layout_by_code(expected_layout);
    if (!want) return fail(err, VGPU_REGION_E_ARG, 0, "unknown layout code %d", expected_layout);
    size_t off;
    if (field == VGPU_REGION_FIELD_UTILIZATION_SWITCH) off = want->off_util_switch;
    else if (field == VGPU_REGION_FIELD_RECENT_KERNEL) off = want->off_recent_kernel;
    else return fail(err, VGPU_REGION_E_ARG, 0, "field %d is not a feedback field", field);

    const layout_desc_t *L = validate(fd, hdr, &file_size, &major, &minor, NULL, err);
    if (!L) return -1;
    if (L != want)
        return fail(err, VGPU_REGION_E_LAYOUT_CHANGED, 0, "layout is now %s, not %s; not writing", L->name,
                    want->name);
    memcpy(b, &value, 4);
    for (;;) {
        ssize_t n = pwrite(fd, b, 4, (off_t)off);
        if (n == 4) return 0;
        if (n < 0 && errno == EINTR) continue;
        int e = n < 0 ? errno : EIO;
        return fail(err, VGPU_REGION_E_IO, e, "pwrite of 4 bytes at offset %zu failed: %s", off, strerror(e));
    }
}
