/* Included before every source file of the fault-injection library (-include): the library's
 * own allocations go through fault.c's counters.  The system headers come first, so that their
 * declarations stay as they are; the macros then replace the calls that follow. */
#ifndef VKG_FAULT_ALLOC_WRAP_H
#define VKG_FAULT_ALLOC_WRAP_H

/* As cpu_backend.c asks (MAP_ANONYMOUS), since the headers below are read first here. */
#define _DEFAULT_SOURCE

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#undef _DEFAULT_SOURCE /* read once, by the headers above; cpu_backend.c defines it again */

#include "fault/fault.h" /* the replacements the macros name */

#define malloc(n) vkg_fault_malloc(n)
#define calloc(n, size) vkg_fault_calloc(n, size)
#define realloc(p, n) vkg_fault_realloc(p, n)
#define strdup(s) vkg_fault_strdup(s)
#define aligned_alloc(align, n) vkg_fault_aligned_alloc(align, n)
#define mmap(addr, n, prot, flags, fd, offset) vkg_fault_mmap(addr, n, prot, flags, fd, offset)

#endif
