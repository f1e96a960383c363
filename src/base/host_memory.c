#include "vkgraph.h"

#include <unistd.h>

uint64_t vkg_host_memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return UINT64_MAX;
    return (uint64_t)pages * (uint64_t)page;
}
