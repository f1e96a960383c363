/* Filling a vkg_error: one place, so every message has the same form. */
#ifndef VKG_ERROR_H
#define VKG_ERROR_H

#include "vkgraph.h"

#if defined(__GNUC__)
#define VKG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define VKG_PRINTF(a, b)
#endif

/* Sets err (when non-NULL) and returns status, so callers can write
 * `return vkg_error_set(err, VKG_ERR_IO, "cannot open %s", path);` */
vkg_status vkg_error_set(vkg_error *err, vkg_status status, const char *fmt, ...) VKG_PRINTF(3, 4);
void vkg_error_clear(vkg_error *err);

#endif
