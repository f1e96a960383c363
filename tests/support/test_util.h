/* Helpers every test can use. */
#ifndef VKG_TEST_UTIL_H
#define VKG_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vkgraph.h"
#include "vkgraph_model.h"

/* Normalised mean squared error: sum((a-b)^2) / max(sum(b^2), tiny). */
double test_nmse(const float *a, const float *b, size_t n);
double test_max_abs_diff(const float *a, const float *b, size_t n);
/* A path under the test data folder (VKG_TEST_DATA, else "data"); the string lives until the
 * next call. */
const char *test_data_path(const char *rel);
/* A whole file, NUL-terminated (the caller frees it); fails the test when it cannot be read.
 * len may be NULL. */
char *test_read_file(const char *path, size_t *len);
/* The comma-separated token ids of DIR_REL/ids.txt under the test data folder (at most cap);
 * fails the test when the file cannot be read.  Returns how many were read. */
int test_read_ids(const char *dir_rel, int32_t *ids, int cap);
/* Every position's logits [n, vocab] of the independent NumPy GPT-2 (tools/gpt2_reference.py, run
 * by /usr/bin/python3 as ctest's VKG_REFERENCE names it) for the model in model_dir, written to
 * model_dir/reference.npy and read back (the caller frees them).  Fails the test on any problem. */
float *test_numpy_logits(const char *model_dir, const int32_t *ids, int n, int64_t vocab);
/* The same with the script that the environment variable script_env names (VKG_REFERENCE:
 * tools/gpt2_reference.py, VKG_LLAMA_REFERENCE: tools/llama_reference.py). */
float *test_numpy_logits_of(const char *script_env, const char *model_dir, const int32_t *ids, int n, int64_t vocab);
/* The same, with every layer's attention probabilities [n_layer, n_head, n, n] written to the .npy
 * attention_npy as well (NULL: none). */
float *test_numpy_logits_attention_of(const char *script_env, const char *model_dir, const int32_t *ids, int n,
                                      int64_t vocab, const char *attention_npy);
/* The float32 matrix [rows, cols] of a .npy file (the caller frees it); fails the test when the
 * file cannot be read or has another shape. */
float *test_read_npy_matrix(const char *path, int64_t rows, int64_t cols);
/* Logits [rows, V] against a reference's rows in the same layout: fails the test when their NMSE
 * exceeds nmse_max, or when a row's argmax is not the reference's and the reference's logits of
 * the two lie more than tie apart (closer, either choice is right).  Prints the NMSE under `what`;
 * first numbers the rows in messages.  Returns how many rows were such ties. */
int test_expect_logits(const float *got, const float *want, size_t first, size_t rows, size_t V, double nmse_max,
                       float tie, const char *what);
/* g compiled for dev (its compile options) and a session of the plan; fails the test on any error.
 * The caller frees both. */
vkg_session *test_session_for(vkg_device *dev, vkg_graph *g, vkg_plan **plan);
/* Opens `device` ("cpu": 2 threads; else with the validation layer) and the model in the test data
 * folder under model_rel; 0, or -1 with the error printed and nothing left open (a cmocka setup's
 * return). */
int test_open_model(const char *device, const char *model_rel, vkg_device **dev, vkg_model **model);
/* Frees what test_open_model opened: 0, or -1 after printing how many validation messages the
 * device reported (a cmocka teardown's return). */
int test_close_model(vkg_device *dev, vkg_model *model);

/* The CPU executor, quiet (no device banner): a test's shared device; NULL when it cannot open. */
vkg_device *test_open_cpu(void);

/* A fresh directory under /tmp (caller frees the string; removes nothing). */
char *test_tmpdir(const char *tag);
/* Removes dir and everything under it (symbolic links are removed, never followed); 0 on
 * success, -1 when anything could not be removed. */
int test_remove_tree(const char *dir);

/* Text printed to a FILE, captured in memory: print to test_capture_begin()'s stream, then
 * test_capture_end() gives the text (the caller frees it). */
typedef struct test_capture {
    char *text;
    size_t len;
    FILE *f;
} test_capture;
FILE *test_capture_begin(test_capture *c);
const char *test_capture_end(test_capture *c);
/* The line of text that starts with prefix (and the rest of the text); fails the test if none. */
const char *test_line_with(const char *text, const char *prefix);

/* The ids a generation streams (vkg_token_callback's user data for test_collect_token; the
 * flush of held-back text, id VKG_NO_TOKEN, is not an id).  Ids past the 256th are dropped. */
typedef struct test_tokens {
    int32_t ids[256];
    int n;
} test_tokens;
int test_collect_token(void *user, int32_t id, const char *text, size_t len);

#endif
