/* The one clock: the host's CLOCK_MONOTONIC, for profiles, traces, timings and benchmarks.
 * vkg_clock_seconds (vkgraph.h) reads the same clock in seconds. */
#ifndef VKG_BASE_CLOCK_H
#define VKG_BASE_CLOCK_H

#include <stdint.h>

uint64_t vkg_clock_ns(void);

#endif
