/* How much memory this machine has, for refusing a request before allocating for it. */
#ifndef VKG_CORE_HOST_MEMORY_H
#define VKG_CORE_HOST_MEMORY_H

#include <stdint.h>

/* Physical memory in bytes (sysconf _SC_PHYS_PAGES x page size); UINT64_MAX when unknown, so
 * that an unknown size never refuses anything. */
uint64_t vkg_host_memory_bytes(void);

#endif
