/* Dumps of graphs and plans: text (one line per node or step), Graphviz DOT, and JSON. */
#include "graph/plan.h"

#include <inttypes.h>
#include <string.h>

static const char *dtype_name(vkg_dtype d) { return d == VKG_I32 ? "i32" : "f32"; }

static const char *region_kind_name(vkg_region_kind k) {
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

/* Writes s as a JSON string body (quotes and control characters escaped). */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
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
    case VKG_OP_MASK_CAUSAL: snprintf(buf, size, " offset=%d", n->attr.causal.offset); break;
    case VKG_OP_MASK: snprintf(buf, size, " %s", n->attr.mask.kind == VKG_MASK_BOOL ? "bool" : "additive"); break;
    case VKG_OP_LAYERNORM: snprintf(buf, size, " eps=%g", n->attr.layernorm.eps); break;
    case VKG_OP_PERMUTE: {
        size_t used = (size_t)snprintf(buf, size, " axes=(");
        for (int d = 0; d < n->ndim && used < size; d++)
            used += (size_t)snprintf(buf + used, size - used, "%s%d", d ? "," : "", n->attr.permute.axes[d]);
        if (used < size) snprintf(buf + used, size - used, ")");
        break;
    }
    case VKG_OP_SLICE: snprintf(buf, size, " axis=%d start=%lld", n->attr.slice.axis, (long long)n->attr.slice.start); break;
    case VKG_OP_CONCAT: snprintf(buf, size, " axis=%d", n->attr.concat.axis); break;
    case VKG_OP_WRITE_AT: snprintf(buf, size, " axis=%d offset=%lld", n->attr.write_at.axis, (long long)n->attr.write_at.offset); break;
    default: break;
    }
}

static void node_text(const vkg_graph *g, int i, FILE *f) {
    const vkg_node *n = &g->nodes[i];
    char shape[96], attrs[96], srcs[64] = "";
    shape_text(n, shape, sizeof shape);
    node_attrs(n, attrs, sizeof attrs);
    size_t used = 0;
    for (int s = 0; s < VKG_MAX_SRC; s++)
        if (n->src[s] != VKG_NONE) used += (size_t)snprintf(srcs + used, sizeof srcs - used, "%s%%%d", used ? "," : "", (int)n->src[s]);
    fprintf(f, "%%%-4d %-12s %-22s %-16s %s  (%s)%s%s\n", i, vkg_op_name(n->op), vkg_tensor_name(g, i), shape,
            dtype_name(n->dtype), srcs, attrs, n->output_name ? "  -> output" : "");
}

vkg_status vkg_graph_dump(const vkg_graph *g, FILE *f, vkg_dump_format fmt) {
    if (fmt == VKG_DUMP_TEXT) {
        fprintf(f, "graph: %d nodes, %" PRId64 " parameters%s%s\n", g->n_nodes, vkg_graph_constant_numel(g),
                g->status ? ", error: " : "", g->error);
        for (int i = 0; i < g->n_nodes; i++) node_text(g, i, f);
        return VKG_OK;
    }
    if (fmt == VKG_DUMP_DOT) {
        fprintf(f, "digraph vkgraph {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n");
        for (int i = 0; i < g->n_nodes; i++) {
            const vkg_node *n = &g->nodes[i];
            char shape[96];
            shape_text(n, shape, sizeof shape);
            const char *style = n->op == VKG_OP_INPUT ? ", style=filled, fillcolor=\"#d0e8ff\""
                              : n->op == VKG_OP_CONSTANT ? ", style=filled, fillcolor=\"#eeeeee\""
                              : n->output_name ? ", style=filled, fillcolor=\"#d8f5d0\"" : "";
            fprintf(f, "  n%d [label=\"%s\\n%s\\n%s\"%s];\n", i, vkg_op_name(n->op), vkg_tensor_name(g, i), shape, style);
            for (int s = 0; s < VKG_MAX_SRC; s++)
                if (n->src[s] != VKG_NONE) fprintf(f, "  n%d -> n%d;\n", (int)n->src[s], i);
        }
        fprintf(f, "}\n");
        return VKG_OK;
    }
    if (fmt != VKG_DUMP_JSON) return VKG_ERR_INVALID_ARGUMENT;
    fprintf(f, "{\"nodes\": [\n");
    for (int i = 0; i < g->n_nodes; i++) {
        const vkg_node *n = &g->nodes[i];
        fprintf(f, "  {\"id\": %d, \"op\": \"%s\", \"name\": ", i, vkg_op_name(n->op));
        json_str(f, vkg_tensor_name(g, i));
        fprintf(f, ", \"dtype\": \"%s\", \"shape\": [", dtype_name(n->dtype));
        for (int d = 0; d < n->ndim; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)n->shape[d]);
        fprintf(f, "], \"inputs\": [");
        int first = 1;
        for (int s = 0; s < VKG_MAX_SRC; s++)
            if (n->src[s] != VKG_NONE) {
                fprintf(f, "%s%d", first ? "" : ", ", (int)n->src[s]);
                first = 0;
            }
        fprintf(f, "], \"output\": %s}%s\n", n->output_name ? "true" : "false", i + 1 < g->n_nodes ? "," : "");
    }
    fprintf(f, "]}\n");
    return VKG_OK;
}

/* "arena+4096:1024 w" */
static void binding_text(const vkg_plan *p, const vkg_binding *b, char *buf, size_t size) {
    const vkg_region *r = &p->regions[b->region];
    if (r->kind == VKG_REGION_ARENA || r->kind == VKG_REGION_INDICES)
        snprintf(buf, size, "%s+%" PRIu64 ":%" PRIu64 "%s", region_kind_name(r->kind), b->offset, b->bytes, b->writes ? " w" : "");
    else
        snprintf(buf, size, "%s(%s)+%" PRIu64 ":%" PRIu64 "%s", region_kind_name(r->kind),
                 vkg_tensor_name(p->graph, r->tensor), b->offset, b->bytes, b->writes ? " w" : "");
}

static void memory_text(const vkg_plan *p, FILE *f) {
    const vkg_memory_stats *m = &p->stats;
    fprintf(f, "memory: arena %" PRIu64 " bytes (naive %" PRIu64 ", lower bound %" PRIu64 "), constants %" PRIu64
               " bytes, %d steps, %d in place\n",
            m->arena_bytes, m->naive_bytes, m->lower_bound_bytes, m->constant_bytes, m->steps, m->in_place_steps);
}

static vkg_status plan_text(const vkg_plan *p, FILE *f) {
    memory_text(p, f);
    fprintf(f, "regions:\n");
    for (int r = 0; r < p->n_regions; r++)
        fprintf(f, "  r%-3d %-9s %-24s %" PRIu64 " bytes\n", r, region_kind_name(p->regions[r].kind),
                p->regions[r].tensor != VKG_NONE ? vkg_tensor_name(p->graph, p->regions[r].tensor) : "",
                p->regions[r].bytes);
    fprintf(f, "steps (| = barrier before the step, * = in place):\n");
    for (int s = 0; s < p->n_steps; s++) {
        const vkg_step *st = &p->steps[s];
        const vkg_node *n = &p->graph->nodes[st->node];
        char shape[96];
        shape_text(n, shape, sizeof shape);
        fprintf(f, "%4d %c%c %-24s %-20s %-16s %s", s, st->barrier ? '|' : ' ', st->in_place ? '*' : ' ', st->label,
                vkg_tensor_name(p->graph, st->node), shape, dtype_name(n->dtype));
        for (int b = 0; b < VKG_MAX_BINDINGS; b++) {
            if (st->bind[b].region < 0) continue;
            char text[96];
            binding_text(p, &st->bind[b], text, sizeof text);
            fprintf(f, "  %d=%s", b, text);
        }
        fputc('\n', f);
    }
    return VKG_OK;
}

static vkg_status plan_dot(const vkg_plan *p, FILE *f) {
    fprintf(f, "digraph plan {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n");
    for (int r = 0; r < p->n_regions; r++)
        fprintf(f, "  r%d [shape=cylinder, label=\"%s\\n%s\\n%" PRIu64 " B\"];\n", r, region_kind_name(p->regions[r].kind),
                p->regions[r].tensor != VKG_NONE ? vkg_tensor_name(p->graph, p->regions[r].tensor) : "",
                p->regions[r].bytes);
    for (int s = 0; s < p->n_steps; s++) {
        const vkg_step *st = &p->steps[s];
        fprintf(f, "  s%d [label=\"%d: %s\\n%s%s\"%s];\n", s, s, st->label, vkg_tensor_name(p->graph, st->node),
                st->in_place ? "\\n(in place)" : "", st->barrier ? ", penwidth=2" : "");
        if (s > 0) fprintf(f, "  s%d -> s%d [style=dotted];\n", s - 1, s);
        for (int b = 0; b < VKG_MAX_BINDINGS; b++) {
            const vkg_binding *bd = &st->bind[b];
            if (bd->region < 0) continue;
            if (bd->writes) fprintf(f, "  s%d -> r%d [label=\"+%" PRIu64 "\"];\n", s, bd->region, bd->offset);
            else fprintf(f, "  r%d -> s%d [label=\"+%" PRIu64 "\"];\n", bd->region, s, bd->offset);
        }
    }
    fprintf(f, "}\n");
    return VKG_OK;
}

static vkg_status plan_json(const vkg_plan *p, FILE *f) {
    const vkg_memory_stats *m = &p->stats;
    fprintf(f, "{\"memory\": {\"arena_bytes\": %" PRIu64 ", \"naive_bytes\": %" PRIu64 ", \"lower_bound_bytes\": %" PRIu64
               ", \"constant_bytes\": %" PRIu64 ", \"steps\": %d, \"in_place_steps\": %d},\n",
            m->arena_bytes, m->naive_bytes, m->lower_bound_bytes, m->constant_bytes, m->steps, m->in_place_steps);
    fprintf(f, " \"regions\": [\n");
    for (int r = 0; r < p->n_regions; r++) {
        fprintf(f, "  {\"id\": %d, \"kind\": \"%s\", \"tensor\": ", r, region_kind_name(p->regions[r].kind));
        if (p->regions[r].tensor != VKG_NONE) json_str(f, vkg_tensor_name(p->graph, p->regions[r].tensor));
        else fprintf(f, "null");
        fprintf(f, ", \"bytes\": %" PRIu64 "}%s\n", p->regions[r].bytes, r + 1 < p->n_regions ? "," : "");
    }
    fprintf(f, " ],\n \"steps\": [\n");
    for (int s = 0; s < p->n_steps; s++) {
        const vkg_step *st = &p->steps[s];
        const vkg_node *n = &p->graph->nodes[st->node];
        fprintf(f, "  {\"step\": %d, \"kernel\": \"%s\", \"label\": ", s, vkg_kernel_name(st->kernel));
        json_str(f, st->label);
        fprintf(f, ", \"node\": ");
        json_str(f, vkg_tensor_name(p->graph, st->node));
        fprintf(f, ", \"shape\": [");
        for (int d = 0; d < n->ndim; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)n->shape[d]);
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
        fprintf(f, "]}%s\n", s + 1 < p->n_steps ? "," : "");
    }
    fprintf(f, " ]}\n");
    return VKG_OK;
}

vkg_status vkg_plan_dump(const vkg_plan *p, FILE *f, vkg_dump_format fmt) {
    switch (fmt) {
    case VKG_DUMP_TEXT: return plan_text(p, f);
    case VKG_DUMP_DOT: return plan_dot(p, f);
    case VKG_DUMP_JSON: return plan_json(p, f);
    }
    return VKG_ERR_INVALID_ARGUMENT;
}
