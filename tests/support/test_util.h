/* Helpers every test can use. */
#ifndef VKG_TEST_UTIL_H
#define VKG_TEST_UTIL_H

#include <stddef.h>

/* Normalised mean squared error: sum((a-b)^2) / max(sum(b^2), tiny). */
double test_nmse(const float *a, const float *b, size_t n);
double test_max_abs_diff(const float *a, const float *b, size_t n);
/* A fresh directory under /tmp (caller frees the string; removes nothing). */
char *test_tmpdir(const char *tag);

#endif
