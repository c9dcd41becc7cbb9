/*
 * Mutation driver for the region reader, built with -fsanitize=address,undefined (`make sanitize`).
 *
 *   region_fuzz [-n ITERATIONS] [-t SECONDS] [-s SEED] -d WORKDIR SEED_FILE...
 *
 * Each seed file (a real HAMi-core file or a writer-made one, of one of the four region sizes) is
 * copied to WORKDIR/<k>.cache.  Every iteration mutates one copy in place (fields at interesting
 * offsets, random blocks, a new size, or another kind of file under its name), then runs every
 * entry point over it: vgpu_region_open (read-only and read-write), vgpu_region_read (without and
 * with a layout hint, also a wrong one), vgpu_region_read_slot (also out of range) and
 * vgpu_region_write_feedback (any layout, any field); checks what must always hold of their
 * results; and undoes the mutation.  Every 1,000 iterations the copies must decode exactly as at
 * the start.  A sanitizer report aborts the run (exit status != 0); a broken invariant exits 2.
 * Deterministic for a given seed, so a failure reproduces.
 */
#define _GNU_SOURCE
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_SEEDS 16
#define MAX_FILE 2100000
#define MAX_UNDO 8

typedef struct {
    size_t size;              /* file size (struct + 1) */
    size_t procs, slot, seq;  /* procs offset, slot size, slot seqlock offset (0: none) */
    size_t status, proc_num;  /* slot status offset, proc_num offset */
} shape_t;

static const shape_t SHAPES[] = {
    {sizeof(vgpu_region_original_t) + 1, offsetof(vgpu_region_original_t, procs), sizeof(vgpu_slot_original_t), 0,
     offsetof(vgpu_slot_original_t, status), offsetof(vgpu_region_original_t, proc_num)},
    {sizeof(vgpu_region_v0_t) + 1, offsetof(vgpu_region_v0_t, procs), sizeof(vgpu_slot_v0_t), 0,
     offsetof(vgpu_slot_v0_t, status), offsetof(vgpu_region_v0_t, proc_num)},
    {sizeof(vgpu_region_v1_t) + 1, offsetof(vgpu_region_v1_t, procs), sizeof(vgpu_slot_v1_t),
     offsetof(vgpu_slot_v1_t, seqlock), offsetof(vgpu_slot_v1_t, status), offsetof(vgpu_region_v1_t, proc_num)},
    {sizeof(vgpu_region_interim_t) + 1, offsetof(vgpu_region_interim_t, procs), sizeof(vgpu_slot_interim_t),
     offsetof(vgpu_slot_interim_t, seqlock), offsetof(vgpu_slot_interim_t, status),
     offsetof(vgpu_region_interim_t, proc_num)},
};

typedef struct {
    char path[4096];
    unsigned char *image; /* the seed's bytes */
    const shape_t *shape;
    vgpu_region_summary_t baseline;
} seed_t;

typedef struct {
    size_t off, len;
} undo_t;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }

static void die(const char *what, const char *path) {
    fprintf(stderr, "region_fuzz: %s %s: %s\n", what, path, strerror(errno));
    exit(3);
}

static int failures;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "region_fuzz: invariant broken: " __VA_ARGS__); \
            fputc('\n', stderr);                                          \
            failures++;                                                   \
        }                                                                 \
    } while (0)

static void check_error(const vgpu_region_error_t *err, int rc) {
    CHECK(memchr(err->message, 0, sizeof err->message) != NULL, "error message not NUL-terminated");
    if (rc < 0) {
        CHECK(err->code > VGPU_REGION_OK && err->code <= VGPU_REGION_E_LAYOUT_CHANGED, "error code %d", err->code);
        CHECK(err->message[0] != 0, "error %d without a message", err->code);
    } else {
        CHECK(err->code == VGPU_REGION_OK, "success with error code %d", err->code);
    }
}

static void check_summary(const vgpu_region_summary_t *s) {
    CHECK(s->layout >= VGPU_REGION_LAYOUT_ORIGINAL && s->layout <= VGPU_REGION_LAYOUT_INTERIM, "layout %d",
          s->layout);
    CHECK(s->device_num <= VGPU_REGION_MAX_DEVICES, "device_num %u", s->device_num);
    CHECK(s->proc_num <= VGPU_REGION_MAX_PROCS, "proc_num %u", s->proc_num);
    CHECK(s->live_procs <= s->proc_num && s->skipped_slots <= s->proc_num, "live %u skipped %u of %u",
          s->live_procs, s->skipped_slots, s->proc_num);
    /* tail + header + per batch of 8: the batch and two seqlock reads; plus the capped retries (3 reads each) */
    uint32_t bound = 2 + 3 * ((s->proc_num + 7) / 8) + 3 * VGPU_REGION_READ_RETRIES + 2;
    CHECK(s->preads <= bound, "%u preads for %u slots (bound %u)", s->preads, s->proc_num, bound);
    for (uint32_t d = 0; d < s->device_num; d++) {
        const vgpu_region_device_t *dev = &s->devices[d];
        CHECK(memchr(dev->uuid, 0, sizeof dev->uuid) != NULL, "uuid of device %u not NUL-terminated", d);
        CHECK(dev->uuid_state >= VGPU_REGION_UUID_EMPTY && dev->uuid_state <= VGPU_REGION_UUID_INVALID,
              "uuid_state %d", dev->uuid_state);
        CHECK(dev->procs <= s->live_procs, "device %u: %u procs of %u live", d, dev->procs, s->live_procs);
    }
}

static void pwrite_all(int fd, const void *buf, size_t len, size_t off, const char *path) {
    if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len) die("pwrite", path);
}

static const uint64_t SPECIAL[] = {0, 1, 2, 3, 7, 15, 16, 17, 1023, 1024, 1025, 0x7fffffff, 0x80000000u,
                                   0xffffffffu, 19920718, 1ull << 63, ~0ull};

/* A value of `len` bytes: special numbers most of the time, else random bytes. */
static void value(unsigned char *out, size_t len) {
    if (below(10) < 6 && (len == 4 || len == 8)) {
        uint64_t v = SPECIAL[below(sizeof SPECIAL / sizeof SPECIAL[0])];
        memcpy(out, &v, len);
        return;
    }
    for (size_t k = 0; k < len; k++) out[k] = (unsigned char)rnd();
}

/* An interesting (offset, length) inside a file of shape `sh`. */
static void interesting(const shape_t *sh, size_t *off, size_t *len) {
    size_t slot = sh->procs + below(12) * sh->slot;
    switch (below(11)) {
    case 0: *off = 0; *len = 4; return;                      /* magic */
    case 1: *off = 4 + 4 * below(3); *len = 4; return;        /* versions / sm_init_flag */
    case 2: *off = below(sh->procs); *len = 1 + below(16); return; /* anywhere in the header */
    case 3: *off = sh->proc_num + 4 * below(4); *len = 4; return;  /* proc_num, switch, recent, priority */
    case 4: *off = sh->size - 1 - below(64); *len = 1 + below(8); return; /* the tail */
    case 5: *off = slot; *len = 4; return;                    /* pid */
    case 6: *off = slot + sh->status; *len = 4; return;       /* status */
    case 7: *off = slot + (sh->seq ? sh->seq : 4); *len = 8; return; /* seqlock */
    case 8: *off = slot + 8 + 8 * below(200); *len = 8; return;      /* counters */
    case 9: *off = sh->procs - 8 * (1 + below(40)); *len = 8; return; /* limits, device_num */
    default: *off = below(sh->size); *len = 1 + below(4096); return; /* a random block */
    }
}

static void exercise(int dirfd, const char *name) {
    vgpu_region_error_t err;
    vgpu_region_summary_t sum;
    vgpu_region_slot_t slot;
    int writable = (int)below(2);
    int fd = vgpu_region_open(dirfd, name, writable, &err);
    check_error(&err, fd);
    if (fd < 0) return;
    int rc = vgpu_region_read(fd, 0, &sum, &err);
    check_error(&err, rc);
    if (rc == 0) check_summary(&sum);
    int32_t hint = below(4) ? (rc == 0 ? sum.layout : 0) : (int32_t)below(7) - 1;
    rc = vgpu_region_read(fd, hint, &sum, &err);
    check_error(&err, rc);
    if (rc == 0) check_summary(&sum);
    for (int k = 0; k < 2; k++) {
        uint32_t index = below(4) ? (uint32_t)below(16) : (uint32_t)below(1100);
        int r = vgpu_region_read_slot(fd, index, &slot, &err);
        check_error(&err, r);
        if (r == 0) CHECK(index < VGPU_REGION_MAX_PROCS, "slot %u read", index);
    }
    if (below(8) == 0) { /* misuse: no output, no error buffer, a bad fd */
        CHECK(vgpu_region_read(fd, 0, NULL, &err) < 0, "read without output");
        CHECK(vgpu_region_read(fd, 0, &sum, NULL) <= 0, "read without error buffer");
        CHECK(vgpu_region_read(-1, 0, &sum, &err) < 0, "read of fd -1");
        CHECK(vgpu_region_read_slot(fd, 0, NULL, &err) < 0, "read_slot without output");
    }
    if (writable) {
        int32_t layout = (int32_t)below(6);
        int32_t field = (int32_t)below(4);
        int w = vgpu_region_write_feedback(fd, layout, field, (int32_t)rnd(), &err);
        check_error(&err, w);
    }
    close(fd);
}

int main(int argc, char **argv) {
    long iterations = 20000, seconds = 60;
    const char *workdir = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "n:t:s:d:")) != -1) {
        if (opt == 'n') iterations = atol(optarg);
        else if (opt == 't') seconds = atol(optarg);
        else if (opt == 's') rng_state = strtoull(optarg, NULL, 0) | 1;
        else if (opt == 'd') workdir = optarg;
        else {
            fprintf(stderr, "usage: %s [-n N] [-t SECONDS] [-s SEED] -d WORKDIR SEED_FILE...\n", argv[0]);
            return 3;
        }
    }
    int nseeds = argc - optind;
    if (!workdir || nseeds < 1 || nseeds > MAX_SEEDS) {
        fprintf(stderr, "region_fuzz: need -d WORKDIR and 1..%d seed files\n", MAX_SEEDS);
        return 3;
    }
    int dirfd = open(workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) die("open", workdir);

    static seed_t seeds[MAX_SEEDS];
    for (int k = 0; k < nseeds; k++) {
        seed_t *s = &seeds[k];
        const char *src = argv[optind + k];
        struct stat st;
        int in = open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0 || fstat(in, &st) < 0) die("open", src);
        for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
            if ((size_t)st.st_size == SHAPES[i].size) s->shape = &SHAPES[i];
        if (!s->shape) {
            fprintf(stderr, "region_fuzz: %s: size %lld is not a region size\n", src, (long long)st.st_size);
            return 3;
        }
        s->image = malloc(s->shape->size);
        if (!s->image || pread(in, s->image, s->shape->size, 0) != (ssize_t)s->shape->size) die("read", src);
        close(in);
        snprintf(s->path, sizeof s->path, "%d.cache", k);
        int out = openat(dirfd, s->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out < 0) die("create", s->path);
        pwrite_all(out, s->image, s->shape->size, 0, s->path);
        close(out);
        vgpu_region_error_t err;
        int fd = vgpu_region_open(dirfd, s->path, 0, &err);
        memset(&s->baseline, 0, sizeof s->baseline); /* the reader fills devices[0, device_num) only */
        if (fd < 0 || vgpu_region_read(fd, 0, &s->baseline, &err) < 0) {
            fprintf(stderr, "region_fuzz: seed %s does not decode: %s\n", src, err.message);
            return 3;
        }
        s->baseline.preads = 0;
        s->baseline.bytes_read = 0;
        close(fd);
    }

    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long done = 0;
    long kinds[4] = {0};
    static unsigned char buf[4096];
    for (; done < iterations; done++) {
        if ((done & 255) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - t0.tv_sec >= seconds) break;
        }
        seed_t *s = &seeds[below((uint64_t)nseeds)];
        const shape_t *sh = s->shape;
        int fd = openat(dirfd, s->path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) die("open", s->path);
        undo_t undo[MAX_UNDO];
        int nundo = 0, resized = 0, kind = (int)below(10);
        if (kind < 6) { /* fields */
            kinds[0]++;
            for (int m = 1 + (int)below(4); m > 0 && nundo < MAX_UNDO; m--) {
                size_t off, len;
                interesting(sh, &off, &len);
                if (off >= sh->size) continue;
                if (len > sh->size - off) len = sh->size - off;
                value(buf, len);
                pwrite_all(fd, buf, len, off, s->path);
                undo[nundo++] = (undo_t){off, len};
            }
            if (below(3)) { /* keep the magic and version valid, to reach the deeper checks */
                pwrite_all(fd, s->image, 12, 0, s->path);
            }
            undo[nundo++] = (undo_t){0, 12};
        } else if (kind < 8) { /* a new size */
            kinds[1]++;
            size_t sizes[] = {0, 1, 4, 12, sh->procs, sh->procs + 1, sh->size - 1, sh->size + 1,
                              SHAPES[below(4)].size, below(MAX_FILE)};
            size_t size = sizes[below(sizeof sizes / sizeof sizes[0])];
            if (ftruncate(fd, (off_t)size) < 0) die("ftruncate", s->path);
            resized = 1;
        } else if (kind == 8) { /* slot counts and seqlocks over many slots */
            kinds[2]++;
            uint32_t n = (uint32_t)below(VGPU_REGION_MAX_PROCS + 1);
            pwrite_all(fd, &n, 4, sh->proc_num, s->path);
            undo[nundo++] = (undo_t){sh->proc_num, 4};
            if (sh->seq) {
                uint64_t odd = 1 + 2 * below(1000);
                for (int m = 0; m < 4 && nundo < MAX_UNDO; m++) {
                    size_t off = sh->procs + below(n + 1) * sh->slot + sh->seq;
                    if (off + 8 > sh->size) continue;
                    pwrite_all(fd, &odd, 8, off, s->path);
                    undo[nundo++] = (undo_t){off, 8};
                }
            }
        }
        close(fd);
        char other[4200];
        snprintf(other, sizeof other, "%s.real", s->path);
        if (kind == 9) { /* another kind of file under the name */
            kinds[3]++;
            if (renameat(dirfd, s->path, dirfd, other) < 0) die("rename", s->path);
            int how = (int)below(4), made;
            if (how == 0) made = mkfifoat(dirfd, s->path, 0600);
            else if (how == 1) made = symlinkat(other, dirfd, s->path);
            else if (how == 2) made = mkdirat(dirfd, s->path, 0700);
            else made = symlinkat("/nonexistent", dirfd, s->path);
            if (made < 0) die("make", s->path);
            exercise(dirfd, s->path);
            if (how == 2) unlinkat(dirfd, s->path, AT_REMOVEDIR);
            else unlinkat(dirfd, s->path, 0);
            if (renameat(dirfd, other, dirfd, s->path) < 0) die("rename back", s->path);
        } else {
            exercise(dirfd, s->path);
        }
        /* Undo: the writes, the size, and the tail (feedback writes land there). */
        fd = openat(dirfd, s->path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) die("reopen", s->path);
        if (resized) {
            if (ftruncate(fd, (off_t)sh->size) < 0) die("ftruncate", s->path);
            pwrite_all(fd, s->image, sh->size, 0, s->path);
        } else {
            for (int u = 0; u < nundo; u++) pwrite_all(fd, s->image + undo[u].off, undo[u].len, undo[u].off, s->path);
            pwrite_all(fd, s->image + sh->proc_num, sh->size - sh->proc_num, sh->proc_num, s->path);
        }
        close(fd);
        if (done % 1000 == 999) { /* every copy is back to its seed */
            for (int k = 0; k < nseeds; k++) {
                vgpu_region_error_t err;
                vgpu_region_summary_t sum;
                memset(&sum, 0, sizeof sum);
                int rfd = vgpu_region_open(dirfd, seeds[k].path, 0, &err);
                CHECK(rfd >= 0 && vgpu_region_read(rfd, 0, &sum, &err) == 0, "seed %d no longer decodes", k);
                if (rfd >= 0) close(rfd);
                sum.preads = 0;
                sum.bytes_read = 0;
                CHECK(memcmp(&sum, &seeds[k].baseline, sizeof sum) == 0, "seed %d decodes differently", k);
            }
        }
        if (failures) break;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    double elapsed = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
    printf("region_fuzz: %ld mutations over %d seeds in %.1f s (fields %ld, sizes %ld, slot counts %ld, "
           "file kinds %ld); %d invariant failures\n",
           done, nseeds, elapsed, kinds[0], kinds[1], kinds[2], kinds[3], failures);
    for (int k = 0; k < nseeds; k++) {
        unlinkat(dirfd, seeds[k].path, 0);
        free(seeds[k].image);
    }
    close(dirfd);
    return failures ? 2 : 0;
}
