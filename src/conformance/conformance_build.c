/* The helpers a conformance case builds its graph with: leaves whose host data is drawn from the
 * case's rng and owned here until the case is done. */
#include "conformance/conformance_cases.h"
#include "base/half.h"
#include "graph/graph.h"
#include "graph/graph_build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float special_value(vkg_rng *r) {
    switch (vkg_rng_next(r) % 3) {
    case 0: return INFINITY;
    case 1: return -INFINITY;
    default: return NAN;
    }
}

/* A normal-shaped draw at a fraction of Box-Muller's cost (vkg_rng_normal's log and cosine were
 * most of the time the large cases took to build): the sum of twelve uniforms on [0, 1) has mean
 * 6 and variance 1 (Irwin-Hall), so sum - 6 lies within 6 of 0 with a normal's shape, enough for
 * test inputs.  Three 64-bit draws give the twelve 16-bit uniforms; every step is exact in float. */
float conf_normal(vkg_rng *r) {
    uint32_t sum = 0;
    for (int k = 0; k < 3; k++) {
        uint64_t x = vkg_rng_next(r);
        sum += (uint32_t)(x & 0xffffu) + (uint32_t)(x >> 16 & 0xffffu) + (uint32_t)(x >> 32 & 0xffffu) +
               (uint32_t)(x >> 48);
    }
    return (float)sum * (1.0f / 65536.0f) - 6.0f;
}

/* Fills n floats laid out as [.., rows, cols] (cols the last axis). */
static void fill_values(vkg_rng *r, float *x, size_t n, size_t rows, size_t cols, conf_fill fill) {
    for (size_t i = 0; i < n; i++) {
        switch (fill) {
        case CONF_FILL_NORMAL: x[i] = conf_normal(r); break;
        case CONF_FILL_WIDE: x[i] = 5.0f * conf_normal(r); break;
        case CONF_FILL_OFFSET: x[i] = 20.0f + conf_normal(r); break;
        case CONF_FILL_SPECIAL:
            x[i] = vkg_rng_next(r) % 4 == 0 ? special_value(r) : conf_normal(r);
            break;
        case CONF_FILL_KEEP: x[i] = vkg_rng_next(r) % 4 != 0 ? 1.0f : 0.0f; break;
        case CONF_FILL_KEEP_NONE_ROW: {
            size_t row = cols ? (i / cols) % (rows ? rows : 1) : 0;
            x[i] = (row == 0 || row == 2) ? 0.0f : vkg_rng_next(r) % 4 != 0 ? 1.0f : 0.0f;
            break;
        }
        case CONF_FILL_ADDITIVE:
            x[i] = vkg_rng_next(r) % 4 == 0 ? -INFINITY : conf_normal(r);
            break;
        }
    }
}

static conf_data *add_data(conf_build *b, size_t bytes) {
    if (b->n_data == b->cap_data) {
        int cap = b->cap_data ? 2 * b->cap_data : 8;
        conf_data *d = realloc(b->data, (size_t)cap * sizeof *d);
        if (!d) return NULL;
        b->data = d;
        b->cap_data = cap;
    }
    void *host = malloc(bytes ? bytes : 1);
    if (!host) return NULL;
    conf_data *d = &b->data[b->n_data++];
    *d = (conf_data){.tensor = VKG_NONE, .host = host, .bytes = bytes};
    return d;
}

static int64_t numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

static vkg_tensor leaf(conf_build *b, int ndim, const int64_t *shape, conf_fill fill, int is_input) {
    if (b->out_of_memory || vkg_graph_status(b->g) != VKG_OK) return VKG_NONE;
    size_t n = (size_t)numel(ndim, shape);
    conf_data *d = add_data(b, n * sizeof(float));
    if (!d) {
        b->out_of_memory = 1;
        return VKG_NONE;
    }
    size_t cols = ndim >= 1 ? (size_t)shape[ndim - 1] : 1, rows = ndim >= 2 ? (size_t)shape[ndim - 2] : 1;
    fill_values(b->rng, d->host, n, rows, cols, fill);
    char name[32];
    snprintf(name, sizeof name, "%s%d", is_input ? "in" : "c", b->n_data - 1);
    d->is_input = is_input;
    d->tensor = is_input ? vkg_input(b->g, name, VKG_F32, ndim, shape)
                         : vkg_constant(b->g, name, VKG_F32, ndim, shape, d->host);
    return d->tensor;
}

vkg_tensor conf_input(conf_build *b, int ndim, const int64_t *shape, conf_fill fill) {
    return leaf(b, ndim, shape, fill, 1);
}

vkg_tensor conf_constant(conf_build *b, int ndim, const int64_t *shape, conf_fill fill) {
    return leaf(b, ndim, shape, fill, 0);
}

vkg_tensor conf_constant16(conf_build *b, int ndim, const int64_t *shape, conf_fill fill, vkg_dtype dtype) {
    if (b->out_of_memory || vkg_graph_status(b->g) != VKG_OK) return VKG_NONE;
    size_t n = (size_t)numel(ndim, shape);
    conf_data *d = add_data(b, n * sizeof(uint16_t));
    float *x = malloc(n * sizeof *x + 1);
    if (!d || !x) {
        free(x);
        b->out_of_memory = 1;
        return VKG_NONE;
    }
    size_t cols = ndim >= 1 ? (size_t)shape[ndim - 1] : 1, rows = ndim >= 2 ? (size_t)shape[ndim - 2] : 1;
    fill_values(b->rng, x, n, rows, cols, fill);
    vkg_f32_to_16bit_n(x, d->host, n, dtype == VKG_BF16);
    free(x);
    char name[32];
    snprintf(name, sizeof name, "c%d", b->n_data - 1);
    d->tensor = vkg_constant(b->g, name, dtype, ndim, shape, d->host);
    return d->tensor;
}

vkg_tensor conf_ids(conf_build *b, int ndim, const int64_t *shape, int64_t vocab, int out_of_range) {
    if (b->out_of_memory || vkg_graph_status(b->g) != VKG_OK) return VKG_NONE;
    size_t n = (size_t)numel(ndim, shape);
    conf_data *d = add_data(b, n * sizeof(int32_t));
    if (!d) {
        b->out_of_memory = 1;
        return VKG_NONE;
    }
    int32_t *ids = d->host;
    for (size_t i = 0; i < n; i++) {
        if (out_of_range && i % 5 == 4) ids[i] = (i / 5) % 2 ? (int32_t)vocab : -1;
        else ids[i] = (int32_t)(vkg_rng_next(b->rng) % (uint64_t)vocab);
    }
    char name[32];
    snprintf(name, sizeof name, "ids%d", b->n_data - 1);
    d->is_input = 1;
    d->tensor = vkg_input(b->g, name, VKG_I32, ndim, shape);
    return d->tensor;
}

void *conf_input_data(conf_build *b, vkg_tensor input, size_t bytes) {
    if (b->out_of_memory || vkg_graph_status(b->g) != VKG_OK) return NULL;
    conf_data *d = add_data(b, bytes);
    if (!d) {
        b->out_of_memory = 1;
        return NULL;
    }
    d->is_input = 1;
    d->tensor = input;
    return d->host;
}

void *conf_state_data(conf_build *b, vkg_tensor state, size_t bytes) {
    if (b->out_of_memory || vkg_graph_status(b->g) != VKG_OK) return NULL;
    conf_data *d = add_data(b, bytes);
    if (!d) {
        b->out_of_memory = 1;
        return NULL;
    }
    d->is_state = 1;
    d->tensor = state;
    return d->host;
}

void conf_set_index(conf_build *b, vkg_tensor index, int32_t value) {
    if (b->n_index == CONF_MAX_INDICES) {
        vkg_graph_fail(b->g, VKG_ERR_INVALID_ARGUMENT, "a conformance case sets at most %d indices",
                       CONF_MAX_INDICES);
        return;
    }
    b->index[b->n_index] = index;
    b->index_value[b->n_index++] = value;
}

vkg_tensor conf_index(conf_build *b, int32_t value) {
    if (b->n_index == CONF_MAX_INDICES || vkg_graph_status(b->g) != VKG_OK) return VKG_NONE;
    char name[32];
    snprintf(name, sizeof name, "index%d", b->n_index);
    vkg_tensor t = vkg_index(b->g, name);
    b->index[b->n_index] = t;
    b->index_value[b->n_index++] = value;
    return t;
}

vkg_tensor conf_state(conf_build *b, int ndim, const int64_t *shape) {
    char name[32];
    snprintf(name, sizeof name, "state%d", b->n_data);
    return vkg_state(b->g, name, ndim, shape);
}

void conf_output(conf_build *b, vkg_tensor t) {
    if (b->n_out == CONF_MAX_OUTPUTS || vkg_graph_status(b->g) != VKG_OK) return;
    char name[32];
    snprintf(name, sizeof name, "out%d", b->n_out);
    if (vkg_output(b->g, name, t) == VKG_OK) b->out[b->n_out++] = t;
}

void conf_defer(conf_build *b, void (*fn)(void *), void *arg) {
    if (b->n_deferred == b->cap_deferred) {
        int cap = b->cap_deferred ? 2 * b->cap_deferred : 4;
        conf_deferred *d = realloc(b->deferred, (size_t)cap * sizeof *d);
        if (!d) {
            /* The case is abandoned (out_of_memory), so nothing reads arg again. */
            b->out_of_memory = 1;
            fn(arg);
            return;
        }
        b->deferred = d;
        b->cap_deferred = cap;
    }
    b->deferred[b->n_deferred++] = (conf_deferred){fn, arg};
}

void conf_build_free(conf_build *b) {
    vkg_graph_free(b->g);
    for (int i = 0; i < b->n_data; i++) free(b->data[i].host);
    for (int i = 0; i < b->n_deferred; i++) b->deferred[i].fn(b->deferred[i].arg);
    free(b->data);
    free(b->deferred);
    *b = (conf_build){0};
}

void conf_describe(const conf_build *b, char *buf, size_t size) {
    if (b->shape[0]) {
        snprintf(buf, size, "%s", b->shape);
        return;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < b->n_data && used + 1 < size; i++) {
        if (b->data[i].tensor < 0) continue;
        int64_t shape[VKG_MAX_DIMS];
        int nd = vkg_tensor_shape(b->g, b->data[i].tensor, shape);
        char one[96];
        int w = snprintf(buf + used, size - used, "%s%s", i ? " " : "", vkg_shape_str(nd, shape, one, sizeof one));
        vkg_dtype dt = vkg_graph_node(b->g, b->data[i].tensor)->dtype;
        if (w >= 0 && used + (size_t)w < size && (dt == VKG_F16 || dt == VKG_BF16))
            w += snprintf(buf + used + w, size - used - (size_t)w, " %s", vkg_dtype_name(dt));
        if (w < 0) break;
        used += (size_t)w;
    }
    if (used >= size && size > 4) strcpy(buf + size - 4, "...");
}
