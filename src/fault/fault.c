/* The counters of fault.h, and the allocation functions alloc_wrap.h maps the library's calls
 * to.  Counters are atomic: the CPU executor's worker threads allocate too. */
#include "fault/fault.h"

/* This file calls the real functions. */
#undef malloc
#undef calloc
#undef realloc
#undef strdup
#undef aligned_alloc
#undef mmap

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static uint64_t calls[VKG_FAULT_KINDS];
static uint64_t armed_at;
static int armed_kind = -1, sticky, fired;

static void arm(vkg_fault_kind kind, uint64_t n, int every_later) {
    for (int k = 0; k < VKG_FAULT_KINDS; k++) __atomic_store_n(&calls[k], 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fired, 0, __ATOMIC_SEQ_CST);
    armed_kind = n ? (int)kind : -1;
    armed_at = n;
    sticky = every_later;
}

void vkg_fault_arm(vkg_fault_kind kind, uint64_t n) { arm(kind, n, 0); }

void vkg_fault_arm_from(vkg_fault_kind kind, uint64_t n) { arm(kind, n, 1); }

int vkg_fault_hit(vkg_fault_kind kind) {
    uint64_t n = __atomic_add_fetch(&calls[kind], 1, __ATOMIC_SEQ_CST);
    if ((int)kind != armed_kind || (sticky ? n < armed_at : n != armed_at)) return 0;
    __atomic_store_n(&fired, 1, __ATOMIC_SEQ_CST);
    return 1;
}

uint64_t vkg_fault_calls(vkg_fault_kind kind) { return __atomic_load_n(&calls[kind], __ATOMIC_SEQ_CST); }

int vkg_fault_fired(void) { return __atomic_load_n(&fired, __ATOMIC_SEQ_CST); }

const char *vkg_fault_kind_name(vkg_fault_kind kind) {
    static const char *const names[VKG_FAULT_KINDS] = {"host allocation", "device allocation", "memory map",
                                                       "Vulkan call", "fence wait"};
    return kind >= 0 && kind < VKG_FAULT_KINDS ? names[kind] : "?";
}

/* ---- what alloc_wrap.h maps the library's calls to ---------------------------------------- */

#define FAIL_ALLOC(result)                          \
    do {                                            \
        if (vkg_fault_hit(VKG_FAULT_HOST_ALLOC)) {  \
            errno = ENOMEM;                         \
            return result;                          \
        }                                           \
    } while (0)

void *vkg_fault_malloc(size_t n) {
    FAIL_ALLOC(NULL);
    return malloc(n);
}

void *vkg_fault_calloc(size_t n, size_t size) {
    FAIL_ALLOC(NULL);
    return calloc(n, size);
}

void *vkg_fault_realloc(void *p, size_t n) {
    FAIL_ALLOC(NULL);
    return realloc(p, n);
}

char *vkg_fault_strdup(const char *s) {
    FAIL_ALLOC(NULL);
    return strdup(s);
}

void *vkg_fault_aligned_alloc(size_t align, size_t n) {
    FAIL_ALLOC(NULL);
    return aligned_alloc(align, n);
}

void *vkg_fault_mmap(void *addr, size_t n, int prot, int flags, int fd, off_t offset) {
    FAIL_ALLOC(MAP_FAILED);
    return mmap(addr, n, prot, flags, fd, offset);
}
