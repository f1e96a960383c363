/* Random GPT-2 models with chosen weights overwritten: NaN or Inf to be refused at load, or
 * finite values large enough to overflow the forward pass for the inputs that meet them. */
#ifndef VKG_TEST_POKED_MODEL_H
#define VKG_TEST_POKED_MODEL_H

#include "io/safetensors.h"

#include <stddef.h>

/* Elements [first, first + count) of tensor `name` set to value. */
typedef struct test_poke {
    const char *name;
    size_t first, count;
    float value;
} test_poke;

/* Writes the default tiny random GPT-2 (2 layers, 4 heads, n_embd 32, 16 positions, 64 tokens;
 * lm_head.weight apart when untied) into dir in dtype, with the n pokes made.  Fails the test
 * on any error. */
void test_write_poked_gpt2(const char *dir, vkg_st_dtype dtype, int untied, const test_poke *pokes, int n_pokes);

#endif
