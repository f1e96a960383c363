/* Before the CPU executor runs a plan it proves that no kernel can read or write outside the
 * bytes a step binds: once per session for everything the parameters fix, and at each run for
 * the one thing they do not (a runtime index that moves a write). */
#ifndef VKG_CPU_CHECK_H
#define VKG_CPU_CHECK_H

#include "graph/plan.h"

/* Every step: a known kernel and op, every binding its parameters need present, inside its
 * region and 4-byte aligned, every element the parameters reach inside the binding, no write to
 * a constant region, no divisor of zero. */
vkg_status vkg_cpu_check_plan(const vkg_plan *p, vkg_error *err);

/* For a step whose output position moves with a runtime index (a unary step with
 * out_dyn_stride, binding 2 its indices; a rope step's rows into the cache, binding 3), checks that
 * the index values in `indices` (that binding) keep the writes inside their binding. */
vkg_status vkg_cpu_check_runtime_index(const vkg_plan *p, int step, const int32_t *indices, vkg_error *err);

#endif
