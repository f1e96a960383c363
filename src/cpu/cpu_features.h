/* What this CPU, and the operating system running on it, let vkgraph's CPU kernels use: read from
 * the CPU itself at run time (cpuid, and xgetbv for the register state the OS saves), never
 * assumed from the build machine.  The same code whichever compiler builds it (gcc's and clang's
 * __builtin_cpu_supports accept different feature names). */
#ifndef VKG_CPU_FEATURES_H
#define VKG_CPU_FEATURES_H

enum {
    VKG_CPU_AVX2 = 1u << 0,   /* AVX2 + FMA + F16C, and the OS saves the YMM registers */
    VKG_CPU_AVX512 = 1u << 1, /* AVX-512 F, BW, DQ and VL, and the OS saves ZMM and mask registers */
};

/* The VKG_CPU_* bits this machine has (0 on a CPU that is not x86-64).  Read once, then cached. */
unsigned vkg_cpu_features(void);

#endif
