/*
 * profiles.h - built-in MIG profile tables (docs/mig.md §3).
 *
 * GPU instance (GI) profiles are per model; compute instance (CI) profiles are
 * derived from the GI's slice count (CI profile id == CI profile constant).
 */
#ifndef FAKENVML_PROFILES_H
#define FAKENVML_PROFILES_H

#pragma GCC visibility push(hidden)

#define MIG_MAX_PLACEMENTS 8
#define MIG_MAX_PROFILES 8

struct mig_gi_profile {
    unsigned constant;           /* NVML_GPU_INSTANCE_PROFILE_* */
    unsigned id;                 /* profileId reported as info.id */
    const char *name;            /* "1g.10gb" (NVML's V name is "MIG " + name) */
    unsigned slices;             /* compute slices (sliceCount) */
    unsigned mem_slices;         /* memory slices = placement size */
    unsigned instances;          /* instanceCount */
    unsigned nplacements;
    unsigned starts[MIG_MAX_PLACEMENTS];
    unsigned long long memory_mib;
    unsigned sm, copy_engines, decoders, encoders, jpegs, ofas;
};

struct mig_model {
    const char *key;             /* short name used in messages */
    unsigned compute_slices;     /* 7 (A100/H100/H200/H20/B200/GB200) or 4 (A30) */
    unsigned memory_slices;      /* 8 or 4 */
    unsigned max_mig_devices;    /* nvmlDeviceGetMaxMigDeviceCount */
    unsigned sm_per_slice;
    unsigned pci_device_id;      /* default pciDeviceId ((device << 16) | 0x10DE) */
    unsigned nprofiles;
    struct mig_gi_profile profiles[MIG_MAX_PROFILES];
};

/* The table for an NVML device name, or NULL when the model has no MIG table. */
const struct mig_model *mig_model_for_name(const char *name);
const struct mig_gi_profile *mig_profile_by_constant(const struct mig_model *m, unsigned constant);
const struct mig_gi_profile *mig_profile_by_id(const struct mig_model *m, unsigned id);

/* Compute-instance profiles: slices for a CI constant (0 if the constant is unknown). */
unsigned mig_ci_slices(unsigned ci_constant);
/* Whether a GI with gi_slices compute slices offers CI profiles of ci_slices. */
int mig_ci_allowed(unsigned gi_slices, unsigned ci_slices);

#pragma GCC visibility pop

#endif
