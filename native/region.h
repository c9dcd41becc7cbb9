/*
 * HAMi-core shared-region files: the four on-disk layouts and a pread-only reader.
 *
 * The layouts mirror docs/hami-core.md §4 (x86-64 Linux, glibc): `sem_t` is
 * 32 bytes, 8-byte aligned, and `size_t` is 8 bytes.  `sem_t` is spelled as an opaque
 * 32-byte block so the offsets do not depend on the platform's <semaphore.h>.  The
 * _Static_asserts below pin every offset of the tables in docs/hami-core.md §4.3–§4.5; tests also compile a small
 * program against this header and compare its offsetof/sizeof output with those tables.
 *
 * The files are written by workload containers, so every byte is untrusted.  The reader
 * never maps the file (a container may truncate it; a mapped read past EOF is SIGBUS),
 * it only preads the header, the live slots and the tail, bounds-checks every count,
 * and reports failures as an error code plus a message, never by crashing.
 */
#ifndef VGPU_REGION_H
#define VGPU_REGION_H

#include <stddef.h>
#include <stdint.h>

#define VGPU_REGION_MAGIC 19920718
#define VGPU_REGION_MAX_DEVICES 16
#define VGPU_REGION_MAX_PROCS 1024
#define VGPU_REGION_UUID_LEN 96
#define VGPU_REGION_MSG_LEN 200
/* A slot whose seqlock is odd or moved is re-read alone up to VGPU_REGION_SEQLOCK_RETRIES times,
 * and one vgpu_region_read makes at most VGPU_REGION_READ_RETRIES such re-reads over all its
 * slots; past either cap the slot is skipped for this read.  So a file whose seqlocks never settle
 * costs about what a settled one does (docs/hami-core.md §8). */
#define VGPU_REGION_SEQLOCK_RETRIES 4
#define VGPU_REGION_READ_RETRIES 32

/* ---- on-disk structures (never instantiated by the reader; used for offsets) ---- */

typedef struct {
    _Alignas(8) unsigned char bytes[32];
} vgpu_sem_t;

typedef struct { /* original & v0: 40 bytes */
    uint64_t context_size, module_size, data_size, offset, total;
} vgpu_devmem_v0_t;

typedef struct { /* v1.x & interim: 64 bytes */
    uint64_t context_size, module_size, data_size, offset, total;
    uint64_t unused[3];
} vgpu_devmem_v1_t;

typedef struct { /* v0: 24 bytes */
    uint64_t dec_util, enc_util, sm_util;
} vgpu_devutil_v0_t;

typedef struct { /* v1.x & interim: 48 bytes */
    uint64_t dec_util, enc_util, sm_util;
    uint64_t unused[3];
} vgpu_devutil_v1_t;

typedef struct { /* original: 784 bytes */
    int32_t pid;
    int32_t hostpid;
    vgpu_devmem_v0_t used[VGPU_REGION_MAX_DEVICES];
    uint64_t monitorused[VGPU_REGION_MAX_DEVICES];
    int32_t status;
} vgpu_slot_original_t;

typedef struct { /* v0: 1168 bytes */
    int32_t pid;
    int32_t hostpid;
    vgpu_devmem_v0_t used[VGPU_REGION_MAX_DEVICES];
    uint64_t monitorused[VGPU_REGION_MAX_DEVICES];
    vgpu_devutil_v0_t device_util[VGPU_REGION_MAX_DEVICES];
    int32_t status;
} vgpu_slot_v0_t;

typedef struct { /* v1.1 / v1.2: 1960 bytes; in v1.1 `seqlock` is unused[0] (always 0) */
    int32_t pid;
    int32_t hostpid;
    vgpu_devmem_v1_t used[VGPU_REGION_MAX_DEVICES];
    uint64_t monitorused[VGPU_REGION_MAX_DEVICES];
    vgpu_devutil_v1_t device_util[VGPU_REGION_MAX_DEVICES];
    int32_t status;
    uint64_t seqlock;
    uint64_t unused[2];
} vgpu_slot_v1_t;

typedef struct { /* interim (HAMi v2.8.1): 1960 bytes, seqlock right after hostpid */
    int32_t pid;
    int32_t hostpid;
    uint64_t seqlock;
    vgpu_devmem_v1_t used[VGPU_REGION_MAX_DEVICES];
    uint64_t monitorused[VGPU_REGION_MAX_DEVICES];
    vgpu_devutil_v1_t device_util[VGPU_REGION_MAX_DEVICES];
    int32_t status;
    uint64_t unused[2];
} vgpu_slot_interim_t;

#define VGPU_REGION_COMMON_HEAD(slot_t)                                   \
    uint64_t device_num;                                                  \
    char uuids[VGPU_REGION_MAX_DEVICES][VGPU_REGION_UUID_LEN];            \
    uint64_t limit[VGPU_REGION_MAX_DEVICES];                              \
    uint64_t sm_limit[VGPU_REGION_MAX_DEVICES];                           \
    slot_t procs[VGPU_REGION_MAX_PROCS];                                  \
    int32_t proc_num;                                                     \
    int32_t utilization_switch;                                           \
    int32_t recent_kernel;                                                \
    int32_t priority;

typedef struct { /* original: 804,680 bytes (file: +1) */
    int32_t initialized_flag;
    int32_t sm_init_flag;
    uint64_t owner_pid;
    vgpu_sem_t sem;
    VGPU_REGION_COMMON_HEAD(vgpu_slot_original_t)
} vgpu_region_original_t;

typedef struct { /* v0: 1,197,896 bytes */
    int32_t initialized_flag;
    int32_t sm_init_flag;
    uint64_t owner_pid;
    vgpu_sem_t sem;
    VGPU_REGION_COMMON_HEAD(vgpu_slot_v0_t)
} vgpu_region_v0_t;

typedef struct { /* v1.1 / v1.2: 2,008,952 bytes; the tail is unused[4] (1.1) or sem_postinit (1.2) */
    int32_t initialized_flag;
    uint32_t major_version;
    uint32_t minor_version;
    int32_t sm_init_flag;
    uint64_t owner_pid;
    vgpu_sem_t sem;
    VGPU_REGION_COMMON_HEAD(vgpu_slot_v1_t)
    uint64_t last_kernel_time;
    vgpu_sem_t sem_postinit;
} vgpu_region_v1_t;

typedef struct { /* interim: 2,008,984 bytes */
    int32_t initialized_flag;
    uint32_t major_version;
    uint32_t minor_version;
    int32_t sm_init_flag;
    uint64_t owner_pid;
    vgpu_sem_t sem;
    vgpu_sem_t sem_postinit;
    VGPU_REGION_COMMON_HEAD(vgpu_slot_interim_t)
    uint64_t last_kernel_time;
    uint64_t unused[4];
} vgpu_region_interim_t;

#undef VGPU_REGION_COMMON_HEAD

_Static_assert(sizeof(vgpu_sem_t) == 32, "sem_t is 32 bytes");
_Static_assert(sizeof(vgpu_devmem_v0_t) == 40 && sizeof(vgpu_devmem_v1_t) == 64, "device_memory_t");
_Static_assert(sizeof(vgpu_devutil_v0_t) == 24 && sizeof(vgpu_devutil_v1_t) == 48, "device_util_t");
_Static_assert(sizeof(vgpu_slot_original_t) == 784, "original slot");
_Static_assert(sizeof(vgpu_slot_v0_t) == 1168, "v0 slot");
_Static_assert(sizeof(vgpu_slot_v1_t) == 1960 && offsetof(vgpu_slot_v1_t, seqlock) == 1936, "v1 slot");
_Static_assert(sizeof(vgpu_slot_interim_t) == 1960 && offsetof(vgpu_slot_interim_t, status) == 1936, "interim slot");
_Static_assert(sizeof(vgpu_region_original_t) == 804680, "original region");
_Static_assert(sizeof(vgpu_region_v0_t) == 1197896, "v0 region");
_Static_assert(sizeof(vgpu_region_v1_t) == 2008952, "v1 region");
_Static_assert(sizeof(vgpu_region_interim_t) == 2008984, "interim region");
_Static_assert(offsetof(vgpu_region_v1_t, proc_num) == 2008896, "v1 proc_num");
_Static_assert(offsetof(vgpu_region_interim_t, proc_num) == 2008928, "interim proc_num");
_Static_assert(offsetof(vgpu_region_original_t, procs) == 1848 && offsetof(vgpu_region_v1_t, procs) == 1856 &&
               offsetof(vgpu_region_interim_t, procs) == 1888, "procs offsets");

/* ---- reader API (mirrored in region.cdef) ---- */

/* Layout codes (also the Python enum values). */
enum {
    VGPU_REGION_LAYOUT_UNKNOWN = 0,
    VGPU_REGION_LAYOUT_ORIGINAL = 1,
    VGPU_REGION_LAYOUT_V0 = 2,
    VGPU_REGION_LAYOUT_V1 = 3,      /* v1.1 or v1.2: tell by minor_version */
    VGPU_REGION_LAYOUT_INTERIM = 4,
};

/* Error codes: one per distinct problem, so callers can react precisely. */
enum {
    VGPU_REGION_OK = 0,
    VGPU_REGION_E_ARG = 1,           /* bad argument from the caller (not the file's fault) */
    VGPU_REGION_E_NOT_FOUND = 2,     /* the name does not exist */
    VGPU_REGION_E_SYMLINK = 3,       /* the name is a symbolic link (never followed) */
    VGPU_REGION_E_NOT_REGULAR = 4,   /* directory, FIFO, socket, device... */
    VGPU_REGION_E_OPEN = 5,          /* open failed otherwise (errno in sys_errno) */
    VGPU_REGION_E_RACE = 6,          /* the name was replaced between the check and the open */
    VGPU_REGION_E_SIZE = 7,          /* the size is not one of the four known region sizes */
    VGPU_REGION_E_UNINITIALISED = 8, /* magic not set yet: the creator is still initialising */
    VGPU_REGION_E_MAGIC = 9,         /* a non-zero, wrong magic */
    VGPU_REGION_E_VERSION = 10,      /* v1.x-sized file whose major_version is not 1 */
    VGPU_REGION_E_SHORT_READ = 11,   /* the file shrank while being read */
    VGPU_REGION_E_IO = 12,           /* fstat/pread/pwrite failed (errno in sys_errno) */
    VGPU_REGION_E_LAYOUT_CHANGED = 13, /* a write whose expected layout no longer matches */
};

/* Anomalies: the file decoded, but something was clamped or skipped. */
enum {
    VGPU_REGION_A_DEVICE_NUM_CLAMPED = 1 << 0, /* device_num > 16 */
    VGPU_REGION_A_PROC_NUM_CLAMPED = 1 << 1,   /* proc_num > 1024 */
    VGPU_REGION_A_PROC_NUM_NEGATIVE = 1 << 2,  /* proc_num < 0 */
    VGPU_REGION_A_BAD_UUID = 1 << 3,           /* a uuid without NUL or with non-printable bytes */
    VGPU_REGION_A_SLOT_SKIPPED = 1 << 4,       /* a slot's seqlock did not settle within the retry caps */
    VGPU_REGION_A_SUM_SATURATED = 1 << 5,      /* a per-device sum overflowed 64 bits */
    VGPU_REGION_A_UNKNOWN_MINOR = 1 << 6,      /* v1.x with minor not 1 or 2 (read as v1.2) */
};

/* uuid_state values */
enum {
    VGPU_REGION_UUID_EMPTY = 0,   /* uuids[d][0] == 0: NVML not initialised in the container yet */
    VGPU_REGION_UUID_VALID = 1,   /* NUL-terminated printable ASCII */
    VGPU_REGION_UUID_INVALID = 2, /* untrusted garbage: skip the device */
};

typedef struct {
    int32_t code;       /* VGPU_REGION_OK or VGPU_REGION_E_* */
    int32_t sys_errno;  /* errno for E_OPEN/E_IO, else 0 */
    char message[VGPU_REGION_MSG_LEN]; /* what went wrong; the caller prefixes the file name */
} vgpu_region_error_t;

typedef struct {
    int32_t uuid_state;
    char uuid[VGPU_REGION_UUID_LEN];  /* always NUL-terminated copy */
    uint64_t limit;                   /* bytes, 0 = unlimited */
    uint64_t sm_limit;                /* percent, 100 = unlimited */
    uint64_t used_total;              /* sums over the slots in use */
    uint64_t used_context;
    uint64_t used_module;
    uint64_t used_data;
    uint64_t used_offset;
    uint64_t monitor_used;
    uint64_t sm_util;
    uint32_t procs;                   /* slots in use with used[d].total > 0 */
} vgpu_region_device_t;

typedef struct {
    int32_t layout;            /* VGPU_REGION_LAYOUT_* */
    uint32_t major_version;    /* 0 for original/v0 (no version fields) */
    uint32_t minor_version;
    int32_t seqlocked;         /* 1 when slots were read under the seqlock (v1.2+ and interim) */
    int32_t has_util;          /* layout has device_util (all but original) */
    int32_t has_last_kernel;   /* layout has last_kernel_time (v1.x, interim) */
    uint64_t file_size;
    uint64_t device_num_raw;   /* as stored */
    uint32_t device_num;       /* clamped to 16 */
    int32_t proc_num_raw;      /* as stored */
    uint32_t proc_num;         /* clamped to [0, 1024] */
    uint32_t live_procs;       /* slots with pid != 0 and status != 0 */
    uint32_t skipped_slots;    /* slots skipped: seqlock did not settle within the retry caps */
    int32_t sm_init_flag;
    int32_t utilization_switch;
    int32_t recent_kernel;
    int32_t priority;
    uint64_t last_kernel_time; /* Unix seconds; 0 when the layout has none */
    uint32_t anomalies;        /* VGPU_REGION_A_* bits */
    uint32_t preads;           /* syscalls used: shows the cost follows live slots */
    uint64_t bytes_read;
    uint64_t limit[VGPU_REGION_MAX_DEVICES];
    uint64_t sm_limit[VGPU_REGION_MAX_DEVICES];
    vgpu_region_device_t devices[VGPU_REGION_MAX_DEVICES]; /* [0, device_num) are filled */
} vgpu_region_summary_t;

typedef struct {
    uint64_t context_size, module_size, data_size, offset, total;
    uint64_t monitor_used;
    uint64_t sm_util;
} vgpu_region_slot_device_t;

typedef struct {
    int32_t pid;
    int32_t hostpid;
    int32_t status;
    int32_t in_use;            /* pid != 0 && status != 0 */
    int32_t consistent;        /* 0 when the seqlock never settled (counters are then zero) */
    uint64_t seqlock;          /* 0 for layouts without one */
    vgpu_region_slot_device_t devices[VGPU_REGION_MAX_DEVICES];
} vgpu_region_slot_t;

/* Open `path` (relative to `dirfd`, or AT_FDCWD) only if it is a regular file, and never open
 * anything else for I/O: the name is first resolved to an O_PATH descriptor (no final symlink
 * followed, no device or FIFO open routine run), that inode is verified by fstat, and only then
 * is it opened for reading (or read-write) through /proc/self/fd/N, which is that same inode
 * whatever the name points to by then.  Returns the fd or -1 and fills err. */
int vgpu_region_open(int dirfd, const char *path, int writable, vgpu_region_error_t *err);

/* Decode the region behind `fd` in one call.  Returns 0, or -1 with err filled.
 * `layout_hint` (0 = none) is the layout of the previous read of this fd: when the file still
 * has that layout's size, the tail read proves it and the fstat is skipped. */
int vgpu_region_read(int fd, int32_t layout_hint, vgpu_region_summary_t *out, vgpu_region_error_t *err);

/* Decode slot `index` (< 1024) in detail, for inspection.  Returns 0 or -1. */
int vgpu_region_read_slot(int fd, uint32_t index, vgpu_region_slot_t *out, vgpu_region_error_t *err);

/* Feedback fields: the only two the monitor ever writes (4-byte aligned pwrite). */
enum {
    VGPU_REGION_FIELD_UTILIZATION_SWITCH = 1,
    VGPU_REGION_FIELD_RECENT_KERNEL = 2,
};

/* pwrite `value` into `field`, after checking the file still has `expected_layout`. */
int vgpu_region_write_feedback(int fd, int32_t expected_layout, int32_t field, int32_t value,
                               vgpu_region_error_t *err);

#endif
