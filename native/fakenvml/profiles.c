/* profiles.c - MIG profile tables.  Values: docs/mig.md §3.
 * Memory sizes are NVML's memorySizeMB (nominal for A30, H200, H20, B200 and GB200, as
 * docs/mig.md §3 marks them); SM and engine counts are nominal and only need to be plausible. */
#include "profiles.h"

#include <stddef.h>
#include <string.h>

#include "nvml_abi.h"

#define P7 {0, 1, 2, 3, 4, 5, 6}
#define P4 {0, 1, 2, 3}

/* The five A100-class profiles differ only in names and memory sizes. */
#define A100_CLASS(n1, m1, n1me, n1r2, m1r2, n2, m2, n3, m3, n4, m4, n7, m7, sm)                         \
    {                                                                                                     \
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, n1, 1, 1, 7, 7, P7, m1, sm, 1, 0, 0, 0, 0},               \
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, n1me, 1, 1, 1, 7, P7, m1, sm, 1, 1, 0, 1, 1},        \
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, n1r2, 1, 2, 4, 4, {0, 2, 4, 6}, m1r2, sm, 1, 1, 0, 1, 0}, \
        {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, n2, 2, 2, 3, 3, {0, 2, 4}, m2, 2 * sm, 2, 1, 0, 1, 0},    \
        {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, n3, 3, 4, 2, 2, {0, 4}, m3, 3 * sm, 3, 2, 0, 2, 0},        \
        {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, n4, 4, 4, 1, 1, {0}, m4, 4 * sm, 4, 2, 0, 2, 0},           \
        {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, n7, 7, 8, 1, 1, {0}, m7, 7 * sm, 7, 5, 0, 7, 1},           \
    }

static const struct mig_model MODELS[] = {
    {"H200-141GB", 7, 8, 7, 16, 0x233510DE, 7,
     A100_CLASS("1g.18gb", 18432, "1g.18gb+me", "1g.35gb", 35840, "2g.35gb", 35840, "3g.71gb", 72704,
                "4g.71gb", 72704, "7g.141gb", 144384, 16)},
    {"H20-96GB", 7, 8, 7, 16, 0x232910DE, 7,
     A100_CLASS("1g.12gb", 12032, "1g.12gb+me", "1g.24gb", 24064, "2g.24gb", 24064, "3g.48gb", 48128,
                "4g.48gb", 48128, "7g.96gb", 96256, 16)},
    {"B200-180GB", 7, 8, 7, 18, 0x290110DE, 7,
     A100_CLASS("1g.23gb", 22784, "1g.23gb+me", "1g.45gb", 45568, "2g.45gb", 45568, "3g.90gb", 91136,
                "4g.90gb", 91136, "7g.180gb", 182272, 18)},
    {"GB200-186GB", 7, 8, 7, 18, 0x294110DE, 7,
     A100_CLASS("1g.23gb", 23552, "1g.23gb+me", "1g.47gb", 47104, "2g.47gb", 47104, "3g.93gb", 94208,
                "4g.93gb", 94208, "7g.186gb", 188416, 18)},
    {"H100-80GB", 7, 8, 7, 16, 0x233010DE, 7,
     A100_CLASS("1g.10gb", 9984, "1g.10gb+me", "1g.20gb", 20096, "2g.20gb", 20096, "3g.40gb", 40448,
                "4g.40gb", 40448, "7g.80gb", 81152, 16)},
    {"A100-80GB", 7, 8, 7, 14, 0x20B210DE, 7,
     A100_CLASS("1g.10gb", 9728, "1g.10gb+me", "1g.20gb", 19968, "2g.20gb", 19968, "3g.40gb", 40192,
                "4g.40gb", 40192, "7g.80gb", 80896, 14)},
    {"A100-40GB", 7, 8, 7, 14, 0x20B010DE, 7,
     A100_CLASS("1g.5gb", 4864, "1g.5gb+me", "1g.10gb", 9856, "2g.10gb", 9856, "3g.20gb", 19968,
                "4g.20gb", 19968, "7g.40gb", 40192, 14)},
    {"A30-24GB", 4, 4, 4, 14, 0x20B710DE, 5,
     {
         {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 14, "1g.6gb", 1, 1, 4, 4, P4, 5836, 14, 1, 0, 0, 0, 0},
         {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 21, "1g.6gb+me", 1, 1, 1, 4, P4, 5836, 14, 1, 1, 0, 1, 1},
         {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 5, "2g.12gb", 2, 2, 2, 2, {0, 2}, 11672, 28, 2, 2, 0, 0, 0},
         {NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1, 6, "2g.12gb+me", 2, 2, 1, 2, {0, 2}, 11672, 28, 2, 2, 0, 1, 1},
         {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 0, "4g.24gb", 4, 4, 1, 1, {0}, 23344, 56, 4, 4, 0, 1, 1},
     }},
};

enum { M_H200, M_H20, M_B200, M_GB200, M_H100, M_A100_80, M_A100_40, M_A30 };

/* Name substrings (case-sensitive, like knownMigGeometries models) -> MODELS index, first match
 * wins: "H200" before "H20", "GB200" before "B200".  Keep in sync with
 * vgpu/sim/nvml/fakenvml.py MIG_MODEL_PATTERNS. */
static const struct {
    const char *pattern;
    int model;
} PATTERNS[] = {
    {"H200", M_H200},
    {"H20", M_H20},
    {"GB200", M_GB200},
    {"B200", M_B200},
    {"H100 80GB HBM3", M_H100}, {"H100-SXM5-80GB", M_H100}, {"H100 SXM5 80GB", M_H100}, {"H100-80GB", M_H100},
    {"A100-SXM4-80GB", M_A100_80}, {"A100-80GB", M_A100_80}, {"A100-PCIE-80GB", M_A100_80}, {"A100 80GB", M_A100_80},
    {"A100-SXM4-40GB", M_A100_40}, {"A100-40GB", M_A100_40}, {"A100-PCIE-40GB", M_A100_40},
    {"A30", M_A30},
};

const struct mig_model *mig_model_for_name(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof(PATTERNS) / sizeof(PATTERNS[0]); i++) {
        const char *hit = strstr(name, PATTERNS[i].pattern);
        if (!hit)
            continue;
        if (PATTERNS[i].model == M_A30 || PATTERNS[i].model == M_H20) {
            /* "A30" but not "A3000", "H20" but not "H200": the character after is not a digit;
             * the 141 GB H20 has another table (none here). */
            char next = hit[strlen(PATTERNS[i].pattern)];
            if (next >= '0' && next <= '9')
                continue;
            if (PATTERNS[i].model == M_H20 && strstr(name, "141GB"))
                continue;
        }
        return &MODELS[PATTERNS[i].model];
    }
    return NULL;
}

const struct mig_gi_profile *mig_profile_by_constant(const struct mig_model *m, unsigned constant)
{
    for (unsigned i = 0; m && i < m->nprofiles; i++)
        if (m->profiles[i].constant == constant)
            return &m->profiles[i];
    return NULL;
}

const struct mig_gi_profile *mig_profile_by_id(const struct mig_model *m, unsigned id)
{
    for (unsigned i = 0; m && i < m->nprofiles; i++)
        if (m->profiles[i].id == id)
            return &m->profiles[i];
    return NULL;
}

unsigned mig_ci_slices(unsigned ci_constant)
{
    switch (ci_constant) {
    case NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE: return 1;
    case NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE: return 2;
    case NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE: return 3;
    case NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE: return 4;
    case NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE: return 7;
    default: return 0;
    }
}

int mig_ci_allowed(unsigned gi_slices, unsigned ci_slices)
{
    if (ci_slices == 0 || ci_slices > gi_slices)
        return 0;
    if (ci_slices == 3)
        return gi_slices == 3 || gi_slices == 7;
    if (ci_slices == 4)
        return gi_slices == 4 || gi_slices == 7;
    return 1;
}
