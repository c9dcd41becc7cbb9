/* The physical floor of one region read (benchmarks/test_region_floor.py): exactly the reads the
 * native reader (native/region.c) makes for a v1.2 file with at most 8 live slots -- the tail
 * (one byte past the end, proving the size), the header with the live slots' seqlock words (one
 * preadv), the live slots (one pread), their seqlock words again (one preadv) -- and the least
 * decoding any reader needs: the used-memory sum of each device.  No validation, no snapshot.
 *
 * Built as a shared object by `make floors` and called through ctypes, so it runs in the same
 * process as the reader it bounds, timed call by call in turn with it. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "region.h"

#define SLOTS 8
#define SLOT_SIZE sizeof(vgpu_slot_v1_t)
#define OFF_PROCS offsetof(vgpu_region_v1_t, procs)
#define OFF_TAIL offsetof(vgpu_region_v1_t, proc_num)
#define TAIL_SIZE (sizeof(vgpu_region_v1_t) - OFF_TAIL + 1)
#define SEQ_OFF offsetof(vgpu_slot_v1_t, seqlock)

static int seq_iov(struct iovec *iov, uint64_t *seq, unsigned char *scratch, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        iov[k++] = (struct iovec){scratch, SEQ_OFF};
        iov[k++] = (struct iovec){&seq[i], 8};
        iov[k++] = (struct iovec){scratch, SLOT_SIZE - SEQ_OFF - 8};
    }
    return k;
}

/* Read each of `n` open files; `sums[f * 16 + d]` = used bytes of device d of file f.
 * Returns the number of files read in full (a short read stops at that file). */
int region_floor_read(const int *fds, int n, uint64_t *sums) {
    static unsigned char hdr[OFF_PROCS], tail[TAIL_SIZE + 1], scratch[SLOT_SIZE], chunk[SLOTS * SLOT_SIZE];
    uint64_t s1[SLOTS], s2[SLOTS];
    struct iovec iov[1 + 3 * SLOTS];
    for (int f = 0; f < n; f++) {
        int fd = fds[f];
        if (pread(fd, tail, TAIL_SIZE + 1, (off_t)OFF_TAIL) != (ssize_t)TAIL_SIZE) return f;
        int32_t procs;
        memcpy(&procs, tail, 4);
        int live = procs < 0 ? 0 : procs > SLOTS ? SLOTS : procs;
        iov[0] = (struct iovec){hdr, OFF_PROCS};
        int k = 1 + seq_iov(iov + 1, s1, scratch, live);
        if (preadv(fd, iov, k, 0) != (ssize_t)(OFF_PROCS + (size_t)live * SLOT_SIZE)) return f;
        if (pread(fd, chunk, (size_t)live * SLOT_SIZE, (off_t)OFF_PROCS) != (ssize_t)((size_t)live * SLOT_SIZE))
            return f;
        k = seq_iov(iov, s2, scratch, live);
        if (preadv(fd, iov, k, (off_t)OFF_PROCS) != (ssize_t)((size_t)live * SLOT_SIZE)) return f;
        uint64_t ndev;
        memcpy(&ndev, hdr + offsetof(vgpu_region_v1_t, device_num), 8);
        if (ndev > VGPU_REGION_MAX_DEVICES) ndev = VGPU_REGION_MAX_DEVICES;
        uint64_t *out = sums + (size_t)f * VGPU_REGION_MAX_DEVICES;
        memset(out, 0, VGPU_REGION_MAX_DEVICES * sizeof *out);
        for (int i = 0; i < live; i++) {
            const unsigned char *slot = chunk + (size_t)i * SLOT_SIZE;
            int32_t pid, status;
            memcpy(&pid, slot, 4);
            memcpy(&status, slot + offsetof(vgpu_slot_v1_t, status), 4);
            if (!pid || !status || s1[i] != s2[i]) continue;
            for (uint64_t d = 0; d < ndev; d++) {
                uint64_t total;
                memcpy(&total, slot + offsetof(vgpu_slot_v1_t, used) + d * sizeof(vgpu_devmem_v1_t) +
                                   offsetof(vgpu_devmem_v1_t, total),
                       8);
                out[d] += total;
            }
        }
    }
    return n;
}
