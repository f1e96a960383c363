#include "base/clock.h"

#include "vkgraph.h"

#include <time.h>

uint64_t vkg_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double vkg_clock_seconds(void) { return (double)vkg_clock_ns() * 1e-9; }
