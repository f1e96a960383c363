/* Stop strings over streamed text: hold back what could begin one (see stop_strings.h). */
#include "models/stop_strings.h"

#include "base/error.h"

#include <stdlib.h>
#include <string.h>

vkg_status vkg_stop_init(vkg_stop *s, const char *const *stops, int n, vkg_error *err) {
    memset(s, 0, sizeof *s);
    s->matched = -1;
    for (int i = 0; i < n; i++)
        if (!stops[i] || !stops[i][0])
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "stop string %d is empty: it would stop at once", i + 1);
    s->stops = stops;
    s->n_stops = n;
    return VKG_OK;
}

void vkg_stop_free(vkg_stop *s) {
    free(s->pending);
    free(s->out);
    memset(s, 0, sizeof *s);
    s->matched = -1;
}

/* The first (leftmost) occurrence of any stop string in the pending text: its offset, or len. */
static size_t first_match(vkg_stop *s) {
    size_t best = s->len;
    for (int i = 0; i < s->n_stops; i++) {
        size_t n = strlen(s->stops[i]);
        for (size_t at = 0; at + n <= s->len && at < best; at++)
            if (memcmp(s->pending + at, s->stops[i], n) == 0) {
                best = at;
                s->matched = i;
                break;
            }
    }
    return best;
}

/* The length of the longest tail of the pending text that is a proper prefix of a stop string:
 * those bytes may still become one. */
static size_t held_tail(const vkg_stop *s) {
    size_t held = 0;
    for (int i = 0; i < s->n_stops; i++) {
        size_t n = strlen(s->stops[i]);
        for (size_t k = n - 1 < s->len ? n - 1 : s->len; k > held; k--)
            if (memcmp(s->pending + s->len - k, s->stops[i], k) == 0) {
                held = k;
                break;
            }
    }
    return held;
}

vkg_status vkg_stop_push(vkg_stop *s, const char *bytes, size_t len, const char **ready, size_t *ready_len,
                         vkg_error *err) {
    *ready = s->out;
    *ready_len = 0;
    if (s->matched >= 0) return VKG_OK;
    if (s->len + len + 1 > s->cap) {
        size_t cap = 2 * (s->len + len + 1);
        char *p = realloc(s->pending, cap), *o = p ? realloc(s->out, cap) : NULL;
        if (p) s->pending = p;
        if (o) s->out = o;
        if (!p || !o) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the stop strings' text");
        s->cap = cap;
    }
    memcpy(s->pending + s->len, bytes, len);
    s->len += len;
    /* Every earlier byte was released only when no occurrence could start at it, so the first
     * occurrence, if any, starts inside the pending text. */
    size_t at = first_match(s);
    size_t release = s->matched >= 0 ? at : s->len - held_tail(s);
    memcpy(s->out, s->pending, release);
    if (s->matched >= 0) {
        s->len = 0; /* the stop string and what followed it in its token are dropped */
    } else {
        memmove(s->pending, s->pending + release, s->len - release);
        s->len -= release;
    }
    *ready = s->out;
    *ready_len = release;
    return VKG_OK;
}

const char *vkg_stop_flush(vkg_stop *s, size_t *len) {
    *len = s->len;
    s->len = 0;
    return s->pending ? s->pending : "";
}

void vkg_stop_reset(vkg_stop *s) {
    s->len = 0;
    s->matched = -1;
}
