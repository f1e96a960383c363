/*
 * A small strict JSON (RFC 8259) parser that builds a read-only tree.
 *
 * Strict means: exactly one value, surrounded only by whitespace (a leading UTF-8 byte order
 * mark is skipped, as RFC 8259 section 8.1 allows); strings must be valid UTF-8 with no raw
 * control characters; \uXXXX escapes are decoded to UTF-8, surrogate pairs are joined and a lone
 * surrogate is an error; numbers follow the JSON grammar (no leading zeros, no "+", no "NaN") and
 * must fit a double; nesting is limited to VKG_JSON_MAX_DEPTH; an object may not hold the same
 * key twice (the RFC leaves duplicates to the reader; for tensor headers and vocabularies a
 * duplicate is always a mistake, so it is reported).
 *
 * Errors name the line and column (both from 1; the column counts characters, not bytes), the
 * byte offset, what was expected and what was found.
 *
 * Memory: the root owns every value, key and string; vkg_json_free(root) releases all of it.
 * Pointers returned by the accessors stay valid until then.  Objects keep their keys in file
 * order; vkg_json_get is a hash lookup for large objects (a 50,257-entry vocabulary).
 */
#ifndef VKG_IO_JSON_H
#define VKG_IO_JSON_H

#include "vkgraph.h"

#include <stddef.h>
#include <stdio.h>

#define VKG_JSON_MAX_DEPTH 256

typedef enum vkg_json_type {
    VKG_JSON_NULL,
    VKG_JSON_BOOL,
    VKG_JSON_NUMBER,
    VKG_JSON_STRING,
    VKG_JSON_ARRAY,
    VKG_JSON_OBJECT
} vkg_json_type;

typedef struct vkg_json vkg_json; /* a value; the root owns everything */

/* text need not be NUL-terminated.  On failure *out is NULL and err says where and why. */
vkg_status vkg_json_parse(const char *text, size_t len, vkg_json **out, vkg_error *err);
/* Reads and parses a whole file; messages start with the path. */
vkg_status vkg_json_parse_file(const char *path, vkg_json **out, vkg_error *err);
void vkg_json_free(vkg_json *root); /* NULL is fine */

/* vkg_json_write_string (vkgraph.h) writes a JSON string: the writers of safetensors headers,
 * dumps, traces and the tool's reports all use that one. */

/* Accessors accept NULL and values of the wrong type, returning the neutral answer noted. */
vkg_json_type vkg_json_type_of(const vkg_json *v);              /* NULL -> VKG_JSON_NULL      */
const char *vkg_json_type_name(vkg_json_type t);                /* "null", "object", ...      */
size_t vkg_json_length(const vkg_json *v);                      /* elements of an array or object, else 0 */
const vkg_json *vkg_json_at(const vkg_json *v, size_t i);        /* array element or object value i */
const char *vkg_json_key_at(const vkg_json *v, size_t i, size_t *len); /* object key i (UTF-8, may hold NUL) */
const vkg_json *vkg_json_get(const vkg_json *obj, const char *key);    /* NULL if absent or not an object */
const vkg_json *vkg_json_get_n(const vkg_json *obj, const char *key, size_t key_len);
const char *vkg_json_string(const vkg_json *v, size_t *len);     /* NULL if not a string; NUL-terminated too */
double vkg_json_number(const vkg_json *v);                       /* 0 if not a number          */
int vkg_json_bool(const vkg_json *v);                            /* 0 if not a boolean         */

#endif
