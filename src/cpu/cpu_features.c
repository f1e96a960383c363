/* CPU features from cpuid and xgetbv (Intel SDM vol. 1, 13.2 and 15.2): an instruction set is
 * usable only when the CPU has it AND the OS has enabled saving its registers in XCR0; a CPU
 * with AVX-512 under an OS (or hypervisor) that does not save ZMM state faults on the first ZMM
 * instruction. */
#include "cpu/cpu_features.h"

#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <stdint.h>

/* XCR0, the register state the OS saves; only to be read when cpuid says OSXSAVE. */
static uint64_t xcr0(void) {
    uint32_t lo, hi;
    /* xgetbv as bytes: the mnemonic needs -mxsave on some assemblers, the encoding needs nothing. */
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static unsigned detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned fma = 1u << 12, osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
    if ((c & (fma | osxsave | avx | f16c)) != (fma | osxsave | avx | f16c)) return 0;
    const uint64_t x = xcr0();
    const uint64_t ymm_state = 0x6;    /* SSE and AVX (upper YMM halves) */
    const uint64_t zmm_state = 0xe0;   /* opmask, ZMM0-15 upper halves, ZMM16-31 */
    if ((x & ymm_state) != ymm_state) return 0;
    if (__get_cpuid_max(0, 0) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned avx2 = 1u << 5, avx512f = 1u << 16, avx512dq = 1u << 17, avx512bw = 1u << 30,
                   avx512vl = 1u << 31;
    if (!(b & avx2)) return 0;
    unsigned features = VKG_CPU_AVX2;
    const unsigned avx512 = avx512f | avx512dq | avx512bw | avx512vl;
    if ((b & avx512) == avx512 && (x & zmm_state) == zmm_state) features |= VKG_CPU_AVX512;
    return features;
}
#else
static unsigned detect(void) { return 0; }
#endif

unsigned vkg_cpu_features(void) {
    /* cpuid traps to the hypervisor in some VMs, so it is read once.  Threads that race here
     * store the same value. */
    static atomic_int cached = -1;
    int f = atomic_load_explicit(&cached, memory_order_relaxed);
    if (f < 0) {
        f = (int)detect();
        atomic_store_explicit(&cached, f, memory_order_relaxed);
    }
    return (unsigned)f;
}
