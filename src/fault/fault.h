/*
 * Fault injection, for tests only: in a library built with VKG_FAULT_INJECTION (the copy
 * src/fault/CMakeLists.txt makes for test_fault_walk), the n-th host allocation, device
 * allocation, memory map or Vulkan call, or the n-th wait for a fence, fails as it would when
 * memory or the device runs out.  Every call of each kind passes through vkg_fault_hit, one
 * counter per kind: the library's own allocations by way of alloc_wrap.h (malloc, calloc,
 * realloc, strdup, aligned_alloc and mmap are macros there), its Vulkan calls by way of
 * vk_wrap.h.  The normal library has none of this (vkg_fault_hit is the constant 0).
 *
 * The test arms a kind with vkg_fault_arm(kind, n) and runs a workload: the n-th call of that
 * kind from then on fails, the others succeed.  Running it once disarmed (n = 0) counts the
 * calls, so a test can walk n over every one of them.
 */
#ifndef VKG_FAULT_FAULT_H
#define VKG_FAULT_FAULT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum vkg_fault_kind {
    VKG_FAULT_HOST_ALLOC = 0,  /* malloc and friends, and mmap (anonymous or of a file): NULL     */
    VKG_FAULT_DEVICE_ALLOC,    /* vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY                 */
    VKG_FAULT_MAP,             /* vkMapMemory: VK_ERROR_MEMORY_MAP_FAILED                         */
    VKG_FAULT_VULKAN,          /* every other Vulkan call that returns a VkResult:
                                  VK_ERROR_OUT_OF_HOST_MEMORY                                     */
    VKG_FAULT_FENCE,           /* vkWaitForFences: VK_TIMEOUT, as if the fence never signalled    */
    VKG_FAULT_KINDS
} vkg_fault_kind;

#ifdef VKG_FAULT_INJECTION
/* Counts a call of kind; 1 when it is the armed one, which must then fail. */
int vkg_fault_hit(vkg_fault_kind kind);
/* Resets every count; the n-th call of kind from now on fails (n >= 1), none when n = 0. */
void vkg_fault_arm(vkg_fault_kind kind, uint64_t n);
/* The same, but the n-th call and every later one fail (a fence that never signals). */
void vkg_fault_arm_from(vkg_fault_kind kind, uint64_t n);
/* Calls of kind counted since the last vkg_fault_arm. */
uint64_t vkg_fault_calls(vkg_fault_kind kind);
/* 1 when the armed call has happened (and failed). */
int vkg_fault_fired(void);
const char *vkg_fault_kind_name(vkg_fault_kind kind);
/* The library's host allocations and maps, as alloc_wrap.h redirects them: each counts a
 * VKG_FAULT_HOST_ALLOC call and fails (NULL, MAP_FAILED) when it is the armed one. */
void *vkg_fault_malloc(size_t n);
void *vkg_fault_calloc(size_t n, size_t size);
void *vkg_fault_realloc(void *p, size_t n);
char *vkg_fault_strdup(const char *s);
void *vkg_fault_aligned_alloc(size_t align, size_t n);
void *vkg_fault_mmap(void *addr, size_t n, int prot, int flags, int fd, off_t offset);
#else
#define vkg_fault_hit(kind) 0
#endif

#endif
