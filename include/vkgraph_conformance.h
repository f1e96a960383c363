/* The conformance suite: every op and every fused kernel, built with the public graph API, run
 * on two devices over a sweep of shapes, the outputs compared by normalized mean squared error
 *
 *     nmse = sum (dut - ref)^2 / sum ref^2      (over the positions finite on both sides)
 *
 * against a threshold stated per op (about 1e-7 for element-wise ops, 5e-4 where a long sum is
 * reordered: matmul, attention, the whole block).  Non-finite values must agree exactly in
 * position and kind (+inf, -inf, NaN): an executor that turns a NaN into 0 fails.
 *
 * Both devices run the same plan, compiled once for the stricter of their limits, so a case
 * compares the two executors' kernels and nothing else.  Inputs come from the seeded vkg_rng:
 * a run is the same on every machine.
 *
 * Used by `vkgraph conformance` (tools/cmd_conformance.c) and tests/test_conformance.c. */
#ifndef VKGRAPH_CONFORMANCE_H
#define VKGRAPH_CONFORMANCE_H

#include "vkgraph.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Thresholds, by what an op does to rounding. */
#define VKG_CONFORMANCE_NMSE_ELEMENTWISE 1e-7
#define VKG_CONFORMANCE_NMSE_REDUCTION 5e-4
/* Fused attention: sums over D and over the keys, reordered (keys split over invocations and the
 * online softmax's rescaling), but each output a convex mix of v rows, so errors stay near fp32
 * rounding (1e-13 measured on lavapipe); 1e-6 leaves room for GPUs' looser exp. */
#define VKG_CONFORMANCE_NMSE_ATTENTION 1e-6
/* A whole model's logits: what a user may expect of any device against the CPU reference. */
#define VKG_CONFORMANCE_NMSE_MODEL 1e-6
/* 16-bit weights (f16, bf16).  Both executors widen the same stored values exactly and sum in
 * f32, so a matmul reading them differs only by the order of its sums, as with f32 weights; an
 * embedding lookup only copies widened values, so any difference is a bug (the margin allows a
 * driver that flushes f16 subnormals, which N(0, 1) tables hold about once in 20000). */
#define VKG_CONFORMANCE_NMSE_MATMUL_16BIT 5e-4
#define VKG_CONFORMANCE_NMSE_EMBEDDING_16BIT 1e-9
#define VKG_CONFORMANCE_NMSE_MODEL_16BIT 1e-6

typedef enum vkg_conformance_level {
    VKG_CONFORMANCE_QUICK = 0,   /* tiny and awkward shapes only: seconds, for the tests       */
    VKG_CONFORMANCE_DEFAULT,     /* + primes, non-multiples of every tile, some GPT-2 sizes    */
    VKG_CONFORMANCE_FULL         /* + GPT-2's largest: 768x3072 layers, the 768x50257 logits
                                    matmul and embedding, softmax rows of T = 1024            */
} vkg_conformance_level;

typedef struct vkg_conformance_options {
    vkg_conformance_level level;
    const char *op;      /* run only this op's cases (see vkg_conformance_op_name); NULL: all   */
    uint64_t seed;       /* seeds the inputs                                                   */
    FILE *progress;      /* when non-NULL, one line per case as it finishes                    */
    /* Checking the checker: when non-zero, every output x the device under test returns moves
     * up by perturb (|x| + 1) before the comparison (a relative error of at least perturb that
     * zeros get too), so a working suite must report FAIL. */
    double perturb;
} vkg_conformance_options;

void vkg_conformance_options_default(vkg_conformance_options *o);

/* The op groups, in the order the suite runs and prints them ("add", "matmul", "block", ..). */
int vkg_conformance_op_count(void);
const char *vkg_conformance_op_name(int i);

/* The comparison of one output. */
typedef struct vkg_conformance_diff {
    double nmse;                    /* over the positions finite on both sides; 0 when the
                                       reference is all zeros and so is the other side        */
    int64_t nonfinite_mismatches;   /* positions whose kind differs: finite, +inf, -inf, NaN  */
    int64_t first_mismatch;         /* index of the first such position, or -1               */
    double max_abs_diff;            /* the largest |dut - ref| over positions finite on both  */
    int64_t worst;                  /* ... and its index; -1 when no position is             */
} vkg_conformance_diff;

void vkg_conformance_compare(const float *dut, const float *ref, size_t n, vkg_conformance_diff *d);
/* nmse within threshold and every non-finite value in the same place. */
int vkg_conformance_diff_passes(const vkg_conformance_diff *d, double threshold);

typedef struct vkg_conformance_case {
    char op[24];            /* the group: "matmul"                                           */
    char variant[40];       /* what is special: "bias+gelu", "transpose B", "inf/nan inputs"  */
    char shape[96];         /* the operands: "[17, 33] [65, 33] [65]"                        */
    double nmse;            /* worst over the case's outputs                                 */
    double threshold;
    int64_t nonfinite_mismatches;
    int64_t first_mismatch;  /* element index (in its output) of the first inf/nan mismatch, -1 */
    int passed;
    double ref_ms, dut_ms;  /* one vkg_session_run on each device (first run: cold caches)   */
    char error[768];        /* why the case could not run (counts as a failure); "" otherwise */
} vkg_conformance_case;

typedef struct vkg_conformance_report {
    char ref_name[128], dut_name[128];
    vkg_conformance_case *cases;
    int n_cases, cap_cases;
    int passed, failed;
    double seconds;         /* wall time of the whole run                                    */
} vkg_conformance_report;

/* Runs the suite with ref as the reference and dut as the device under test.  A case that fails,
 * even one that cannot run on a device, is recorded in r and the suite goes on; the status is an
 * error only for a bad request (an unknown op name) or when memory runs out.  r must be zeroed
 * (or freed) before; free it with vkg_conformance_report_free. */
vkg_status vkg_conformance_run(vkg_device *ref, vkg_device *dut, const vkg_conformance_options *o,
                               vkg_conformance_report *r, vkg_error *err);
void vkg_conformance_report_free(vkg_conformance_report *r);

/* The table: one line per op (cases, worst nmse, threshold, PASS/FAIL), then every failed case
 * with its shape and reason, then "N passed, M failed".  verbose adds a line per case. */
void vkg_conformance_report_print(const vkg_conformance_report *r, FILE *f, int verbose);
/* One case as a line (the progress output and the verbose table use it). */
void vkg_conformance_case_print(const vkg_conformance_case *c, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
