/* Dumps of graphs and plans as text (one line per node or step) and JSON, whole or a range of
 * layers; the DOT writers are in dump_dot.c. */
#include "graph/dump.h"
#include "base/json.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>


const char *vkg_dump_region_kind(vkg_region_kind k) {
    switch (k) {
    case VKG_REGION_ARENA: return "arena";
    case VKG_REGION_INPUT: return "input";
    case VKG_REGION_OUTPUT: return "output";
    case VKG_REGION_CONSTANT: return "constant";
    case VKG_REGION_STATE: return "state";
    case VKG_REGION_INDICES: return "indices";
    }
    return "?";
}

static void shape_text(const vkg_node *n, char *buf, size_t size) { vkg_shape_str(n->ndim, n->shape, buf, size); }

/* The attributes that make a node differ from another of the same op. */
static void node_attrs(const vkg_node *n, char *buf, size_t size) {
    buf[0] = '\0';
    switch (n->op) {
    case VKG_OP_MATMUL:
        snprintf(buf, size, "%s%s", n->attr.matmul.flags & VKG_TRANSPOSE_A ? " transpose_a" : "",
                 n->attr.matmul.flags & VKG_TRANSPOSE_B ? " transpose_b" : "");
        break;
    case VKG_OP_SCALE: snprintf(buf, size, " s=%g", n->attr.scale.s); break;
    case VKG_OP_MASK_CAUSAL:
        snprintf(buf, size, " offset=%d", n->attr.causal.offset);
        if (n->attr.causal.window)
            snprintf(buf + strlen(buf), size - strlen(buf), " window=%u", n->attr.causal.window);
        if (n->attr.causal.rows) snprintf(buf + strlen(buf), size - strlen(buf), " rows=%d", n->attr.causal.rows);
        if (n->attr.causal.one_position) snprintf(buf + strlen(buf), size - strlen(buf), " one_position");
        break;
    case VKG_OP_ROPE:
        snprintf(buf, size, " offset=%d%s", n->attr.rope.offset, n->attr.rope.row_positions ? " positions=rows" : "");
        if (n->attr.rope.rotated)
            snprintf(buf + strlen(buf), size - strlen(buf), " rotated=%lld", (long long)n->attr.rope.rotated);
        break;
    case VKG_OP_MASK: snprintf(buf, size, " %s", n->attr.mask.kind == VKG_MASK_BOOL ? "bool" : "additive"); break;
    case VKG_OP_LAYERNORM: case VKG_OP_RMS_NORM: snprintf(buf, size, " eps=%g", n->attr.layernorm.eps); break;
    case VKG_OP_PERMUTE: {
        size_t used = (size_t)snprintf(buf, size, " axes=(");
        for (int d = 0; d < n->ndim && used < size; d++)
            used += (size_t)snprintf(buf + used, size - used, "%s%d", d ? "," : "", n->attr.permute.axes[d]);
        if (used < size) snprintf(buf + used, size - used, ")");
        break;
    }
    case VKG_OP_SLICE: snprintf(buf, size, " axis=%d start=%lld", n->attr.slice.axis, (long long)n->attr.slice.start); break;
    case VKG_OP_CONCAT: snprintf(buf, size, " axis=%d", n->attr.concat.axis); break;
    case VKG_OP_WRITE_AT:
        snprintf(buf, size, " axis=%d offset=%lld", n->attr.write_at.axis, (long long)n->attr.write_at.offset);
        if (n->attr.write_at.rows)
            snprintf(buf + strlen(buf), size - strlen(buf), " rows=%d", n->attr.write_at.rows);
        if (n->attr.write_at.lead_offset)
            snprintf(buf + strlen(buf), size - strlen(buf), " and %lld along axis %d",
                     (long long)n->attr.write_at.lead_offset, n->attr.write_at.lead_axis);
        break;
    default: break;
    }
}

/* --- which nodes and steps a range of layers shows ----------------------------------------- */

int vkg_graph_layer_count(const vkg_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        int l = vkg_tensor_layer(g, i);
        if (l >= n) n = l + 1;
    }
    return n;
}

static int full_range(vkg_dump_layers r) { return r.begin <= 0 && r.end == INT_MAX; }

/* shown[i] for n items in order, item i of the given layer (-1: none; skip[i]: not placed at all),
 * by the rule in dump.h. */
static void select_items(int n, const int *layer, const unsigned char *skip, int n_layers, vkg_dump_layers r,
                         unsigned char *shown) {
    int first = -1, last = -1;
    for (int i = 0; i < n; i++)
        if (!(skip && skip[i]) && layer[i] >= 0) {
            if (first < 0) first = i;
            last = i;
        }
    int prev = -1;
    for (int i = 0; i < n; i++) {
        if (skip && skip[i]) { shown[i] = 0; continue; }
        int eff = layer[i] >= 0 ? (prev = layer[i]) : (first < 0 || i < first) ? -1 : i > last ? n_layers : prev;
        shown[i] = eff == -1 ? r.begin <= 0 : eff >= n_layers ? r.end >= n_layers : eff >= r.begin && eff < r.end;
    }
}

/* The nodes a graph dump of range r shows: the ops of those layers, and the leaves they read. */
static unsigned char *select_nodes(const vkg_graph *g, vkg_dump_layers r) {
    int n = g->n_nodes ? g->n_nodes : 1;
    unsigned char *shown = calloc((size_t)n, 1), *leaf = calloc((size_t)n, 1);
    int *layer = malloc((size_t)n * sizeof *layer);
    if (shown && leaf && layer) {
        for (int i = 0; i < g->n_nodes; i++) {
            leaf[i] = (unsigned char)vkg_node_is_leaf(&g->nodes[i]);
            layer[i] = vkg_tensor_layer(g, i);
        }
        select_items(g->n_nodes, layer, leaf, vkg_graph_layer_count(g), r, shown);
        for (int i = 0; i < g->n_nodes; i++)
            for (int s = 0; shown[i] && s < VKG_MAX_SRC; s++)
                if (g->nodes[i].src[s] != VKG_NONE && leaf[g->nodes[i].src[s]]) shown[g->nodes[i].src[s]] = 1;
        if (full_range(r)) memset(shown, 1, (size_t)n);
    } else {
        free(shown);
        shown = NULL;
    }
    free(leaf);
    free(layer);
    return shown;
}

static unsigned char *select_steps(const vkg_plan *p, vkg_dump_layers r) {
    int n = p->n_steps ? p->n_steps : 1;
    unsigned char *shown = calloc((size_t)n, 1);
    int *layer = malloc((size_t)n * sizeof *layer);
    if (shown && layer) {
        for (int s = 0; s < p->n_steps; s++) layer[s] = vkg_tensor_layer(p->graph, p->steps[s].node);
        select_items(p->n_steps, layer, NULL, vkg_graph_layer_count(p->graph), r, shown);
    } else {
        free(shown);
        shown = NULL;
    }
    free(layer);
    return shown;
}

/* ", layers 2 to 4 of 12", ", layer 0 of 12 with the embedding" (numbered from 0, as --layers) */
static void range_text(vkg_dump_layers r, int n_layers, FILE *f) {
    if (full_range(r)) return;
    int end = r.end < n_layers ? r.end : n_layers;
    if (end - r.begin == 1) fprintf(f, ", layer %d of %d", r.begin, n_layers);
    else fprintf(f, ", layers %d to %d of %d", r.begin, end - 1, n_layers);
    if (r.begin <= 0) fprintf(f, " with the embedding%s", end >= n_layers ? " and the head" : "");
    else if (end >= n_layers) fprintf(f, " with the head");
}

/* --- graph --------------------------------------------------------------------------------- */

typedef struct node_widths { int op, name, shape; } node_widths;

static void node_text(const vkg_graph *g, int i, const node_widths *w, FILE *f) {
    const vkg_node *n = &g->nodes[i];
    char shape[96], attrs[96], srcs[64] = "";
    shape_text(n, shape, sizeof shape);
    node_attrs(n, attrs, sizeof attrs);
    size_t used = 0;
    for (int s = 0; s < VKG_MAX_SRC; s++)
        if (n->src[s] != VKG_NONE) used += (size_t)snprintf(srcs + used, sizeof srcs - used, "%s%%%d", used ? "," : "", (int)n->src[s]);
    fprintf(f, "%%%-4d %-*s %-*s %-*s %s  (%s)%s", i, w->op, vkg_op_name(n->op), w->name, vkg_tensor_name(g, i),
            w->shape, shape, vkg_dtype_name(n->dtype), srcs, attrs);
    if (n->output_name) fprintf(f, "  -> output '%s'", n->output_name);
    fputc('\n', f);
}

static vkg_status graph_text(const vkg_graph *g, const unsigned char *shown, vkg_dump_layers r, FILE *f) {
    node_widths w = {0, 0, 0};
    int count = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!shown[i]) continue;
        char shape[96];
        shape_text(&g->nodes[i], shape, sizeof shape);
        int lo = (int)strlen(vkg_op_name(g->nodes[i].op)), ln = (int)strlen(vkg_tensor_name(g, i)), ls = (int)strlen(shape);
        if (lo > w.op) w.op = lo;
        if (ln > w.name) w.name = ln;
        if (ls > w.shape) w.shape = ls;
        count++;
    }
    fprintf(f, "graph: %d nodes, %" PRId64 " parameters", g->n_nodes, vkg_graph_constant_numel(g));
    if (!full_range(r)) fprintf(f, "; %d shown", count);
    range_text(r, vkg_graph_layer_count(g), f);
    fprintf(f, "%s%s\n", g->status ? ", error: " : "", g->error);
    for (int i = 0; i < g->n_nodes; i++)
        if (shown[i]) node_text(g, i, &w, f);
    return VKG_OK;
}

static void int_list(FILE *f, int n, const int64_t *v) {
    for (int d = 0; d < n; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)v[d]);
}

/* "layer": N, or null for what belongs to no layer. */
static void json_layer(FILE *f, const vkg_graph *g, vkg_tensor t) {
    int l = vkg_tensor_layer(g, t);
    if (l >= 0) fprintf(f, ", \"layer\": %d", l);
    else fprintf(f, ", \"layer\": null");
}

static vkg_status graph_json(const vkg_graph *g, const unsigned char *shown, FILE *f) {
    fprintf(f, "{\"nodes\": [\n");
    int first_node = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!shown[i]) continue;
        const vkg_node *n = &g->nodes[i];
        fprintf(f, "%s  {\"id\": %d, \"op\": \"%s\", \"name\": ", first_node ? "" : ",\n", i, vkg_op_name(n->op));
        first_node = 0;
        vkg_json_write_string(f, vkg_tensor_name(g, i));
        json_layer(f, g, i);
        fprintf(f, ", \"dtype\": \"%s\", \"shape\": [", vkg_dtype_name(n->dtype));
        int_list(f, n->ndim, n->shape);
        fprintf(f, "], \"inputs\": [");
        int first = 1;
        for (int s = 0; s < VKG_MAX_SRC; s++)
            if (n->src[s] != VKG_NONE) {
                fprintf(f, "%s%d", first ? "" : ", ", (int)n->src[s]);
                first = 0;
            }
        fprintf(f, "], \"output\": %s, \"output_name\": ", n->output_name ? "true" : "false");
        if (n->output_name) vkg_json_write_string(f, n->output_name);
        else fprintf(f, "null");
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
    return VKG_OK;
}

vkg_status vkg_graph_dump_layers(const vkg_graph *g, FILE *f, vkg_dump_format fmt, vkg_dump_layers range) {
    if (fmt != VKG_DUMP_TEXT && fmt != VKG_DUMP_DOT && fmt != VKG_DUMP_JSON) return VKG_ERR_INVALID_ARGUMENT;
    unsigned char *shown = select_nodes(g, range);
    if (!shown) return VKG_ERR_OUT_OF_MEMORY;
    vkg_status st = fmt == VKG_DUMP_TEXT ? graph_text(g, shown, range, f)
                  : fmt == VKG_DUMP_DOT  ? vkg_graph_dot(g, f, shown) : graph_json(g, shown, f);
    free(shown);
    return st;
}

vkg_status vkg_graph_dump(const vkg_graph *g, FILE *f, vkg_dump_format fmt) {
    return vkg_graph_dump_layers(g, f, fmt, VKG_DUMP_ALL_LAYERS);
}

/* --- plan ---------------------------------------------------------------------------------- */

/* "arena+4096:1024 w"; other regions by the name their tensor is bound to. */
static void binding_text(const vkg_plan *p, const vkg_binding *b, char *buf, size_t size) {
    const vkg_region *r = &p->regions[b->region];
    if (r->kind == VKG_REGION_ARENA || r->kind == VKG_REGION_INDICES)
        snprintf(buf, size, "%s+%" PRIu64 ":%" PRIu64 "%s", vkg_dump_region_kind(r->kind), b->offset, b->bytes, b->writes ? " w" : "");
    else
        snprintf(buf, size, "%s(%s)+%" PRIu64 ":%" PRIu64 "%s", vkg_dump_region_kind(r->kind),
                 vkg_tensor_bound_name(p->graph, r->tensor), b->offset, b->bytes, b->writes ? " w" : "");
}

static void memory_text(const vkg_plan *p, FILE *f) {
    const vkg_memory_stats *m = &p->stats;
    fprintf(f, "memory: arena %" PRIu64 " bytes (naive %" PRIu64 ", lower bound %" PRIu64 "), constants %" PRIu64
               " bytes, %d steps, %d in place\n",
            m->arena_bytes, m->naive_bytes, m->lower_bound_bytes, m->constant_bytes, m->steps, m->in_place_steps);
}

/* Marks in used[] the regions the shown steps bind. */
static void used_regions(const vkg_plan *p, const unsigned char *shown, unsigned char *used) {
    for (int s = 0; s < p->n_steps; s++)
        for (int b = 0; shown[s] && b < VKG_MAX_BINDINGS; b++)
            if (p->steps[s].bind[b].region >= 0) used[p->steps[s].bind[b].region] = 1;
}

static vkg_status plan_text(const vkg_plan *p, const unsigned char *shown, vkg_dump_layers range, FILE *f) {
    unsigned char *used = calloc((size_t)(p->n_regions ? p->n_regions : 1), 1);
    if (!used) return VKG_ERR_OUT_OF_MEMORY;
    used_regions(p, shown, used);
    memory_text(p, f);
    int wr = 0, wl = 0, wn = 0, ws = 0, count = 0;
    for (int r = 0; r < p->n_regions; r++) {
        int l = p->regions[r].tensor != VKG_NONE ? (int)strlen(vkg_tensor_bound_name(p->graph, p->regions[r].tensor)) : 0;
        if (used[r] && l > wr) wr = l;
    }
    for (int s = 0; s < p->n_steps; s++) {
        if (!shown[s]) continue;
        char shape[96];
        shape_text(&p->graph->nodes[p->steps[s].node], shape, sizeof shape);
        int ll = (int)strlen(p->steps[s].label), ln = (int)strlen(vkg_tensor_name(p->graph, p->steps[s].node));
        int ls = (int)strlen(shape);
        if (ll > wl) wl = ll;
        if (ln > wn) wn = ln;
        if (ls > ws) ws = ls;
        count++;
    }
    fprintf(f, "regions:\n");
    for (int r = 0; r < p->n_regions; r++)
        if (used[r]) {
            const vkg_region *rg = &p->regions[r];
            fprintf(f, "  r%-3d %-9s %-*s %" PRIu64 " bytes", r, vkg_dump_region_kind(rg->kind), wr,
                    rg->tensor != VKG_NONE ? vkg_tensor_bound_name(p->graph, rg->tensor) : "", rg->bytes);
            /* 16-bit weights say so: as stored, or widened to f32 for a device that cannot read them */
            if (vkg_region_widens(rg)) fprintf(f, " %s as f32", vkg_dtype_name(rg->host_dtype));
            else if (vkg_dtype_is_16bit(rg->dtype)) fprintf(f, " %s", vkg_dtype_name(rg->dtype));
            fputc('\n', f);
        }
    fprintf(f, "steps (| = barrier before the step, * = in place)");
    if (!full_range(range)) fprintf(f, ": %d of %d", count, p->n_steps);
    range_text(range, vkg_graph_layer_count(p->graph), f);
    fprintf(f, ":\n");
    for (int s = 0; s < p->n_steps; s++) {
        if (!shown[s]) continue;
        const vkg_step *st = &p->steps[s];
        const vkg_node *n = &p->graph->nodes[st->node];
        char shape[96];
        shape_text(n, shape, sizeof shape);
        fprintf(f, "%4d %c%c %-*s  %-*s  %-*s  %s", s, st->barrier ? '|' : ' ', st->in_place ? '*' : ' ', wl, st->label,
                wn, vkg_tensor_name(p->graph, st->node), ws, shape, vkg_dtype_name(n->dtype));
        for (int b = 0; b < VKG_MAX_BINDINGS; b++) {
            if (st->bind[b].region < 0) continue;
            char text[160];
            binding_text(p, &st->bind[b], text, sizeof text);
            fprintf(f, "  %d=%s", b, text);
        }
        fputc('\n', f);
    }
    free(used);
    return VKG_OK;
}

static vkg_status plan_json(const vkg_plan *p, const unsigned char *shown, FILE *f) {
    const vkg_memory_stats *m = &p->stats;
    fprintf(f, "{\"memory\": {\"arena_bytes\": %" PRIu64 ", \"naive_bytes\": %" PRIu64 ", \"lower_bound_bytes\": %" PRIu64
               ", \"constant_bytes\": %" PRIu64 ", \"steps\": %d, \"in_place_steps\": %d},\n",
            m->arena_bytes, m->naive_bytes, m->lower_bound_bytes, m->constant_bytes, m->steps, m->in_place_steps);
    fprintf(f, " \"regions\": [\n");
    for (int r = 0; r < p->n_regions; r++) {
        fprintf(f, "  {\"id\": %d, \"kind\": \"%s\", \"tensor\": ", r, vkg_dump_region_kind(p->regions[r].kind));
        if (p->regions[r].tensor != VKG_NONE) vkg_json_write_string(f, vkg_tensor_bound_name(p->graph, p->regions[r].tensor));
        else fprintf(f, "null");
        fprintf(f, ", \"bytes\": %" PRIu64 ", \"dtype\": \"%s\"", p->regions[r].bytes, vkg_dtype_name(p->regions[r].dtype));
        if (p->regions[r].kind == VKG_REGION_CONSTANT)
            fprintf(f, ", \"host_dtype\": \"%s\"", vkg_dtype_name(p->regions[r].host_dtype));
        fprintf(f, "}%s\n", r + 1 < p->n_regions ? "," : "");
    }
    fprintf(f, " ],\n \"steps\": [\n");
    int first_step = 1;
    for (int s = 0; s < p->n_steps; s++) {
        if (!shown[s]) continue;
        const vkg_step *st = &p->steps[s];
        const vkg_node *n = &p->graph->nodes[st->node];
        fprintf(f, "%s  {\"step\": %d, \"kernel\": \"%s\", \"label\": ", first_step ? "" : ",\n", s, vkg_kernel_name(st->kernel));
        first_step = 0;
        vkg_json_write_string(f, st->label);
        fprintf(f, ", \"node\": ");
        vkg_json_write_string(f, vkg_tensor_name(p->graph, st->node));
        json_layer(f, p->graph, st->node);
        fprintf(f, ", \"shape\": [");
        int_list(f, n->ndim, n->shape);
        fprintf(f, "], \"barrier\": %s, \"in_place\": %s, \"bindings\": [", st->barrier ? "true" : "false",
                st->in_place ? "true" : "false");
        int first = 1;
        for (int b = 0; b < VKG_MAX_BINDINGS; b++) {
            const vkg_binding *bd = &st->bind[b];
            if (bd->region < 0) continue;
            fprintf(f, "%s{\"slot\": %d, \"region\": %d, \"offset\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"writes\": %s}",
                    first ? "" : ", ", b, bd->region, bd->offset, bd->bytes, bd->writes ? "true" : "false");
            first = 0;
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n ]}\n");
    return VKG_OK;
}

vkg_status vkg_plan_dump_layers(const vkg_plan *p, FILE *f, vkg_dump_format fmt, vkg_dump_layers range) {
    if (fmt != VKG_DUMP_TEXT && fmt != VKG_DUMP_DOT && fmt != VKG_DUMP_JSON) return VKG_ERR_INVALID_ARGUMENT;
    unsigned char *shown = select_steps(p, range);
    if (!shown) return VKG_ERR_OUT_OF_MEMORY;
    vkg_status st = fmt == VKG_DUMP_TEXT ? plan_text(p, shown, range, f)
                  : fmt == VKG_DUMP_DOT  ? vkg_plan_dot(p, f, shown) : plan_json(p, shown, f);
    free(shown);
    return st;
}

vkg_status vkg_plan_dump(const vkg_plan *p, FILE *f, vkg_dump_format fmt) {
    return vkg_plan_dump_layers(p, f, fmt, VKG_DUMP_ALL_LAYERS);
}
