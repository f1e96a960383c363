/* The names GPT-2 and the lesson block give their nodes, and the dumps that carry them: every
 * node named by its module path, step lines that name what they compute with columns that hold
 * the longest name, the plan DOT as step-to-step data flow (one cluster per layer, no hub node),
 * JSON with names and layers, and dumps of a range of layers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/dump.h"
#include "vkgraph_lesson.h"
#include "models/gpt2.h"
#include "support/test_util.h"

static vkg_gpt2 *load(const char *rel) {
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    if (vkg_gpt2_load(test_data_path(rel), &m, &err) != VKG_OK) fail_msg("%s", err.message);
    return m;
}

static void build(const vkg_gpt2 *m, vkg_forward_options *o, vkg_forward_graph *gg) {
    vkg_error err = {0};
    if (vkg_decoder_build(&m->decoder, o, gg, &err) != VKG_OK) fail_msg("%s", err.message);
}

static vkg_plan *compile(const vkg_graph *g) {
    vkg_plan *p = NULL;
    vkg_error err = {0};
    if (vkg_plan_compile(g, NULL, &p, &err) != VKG_OK) fail_msg("%s", err.message);
    return p;
}

/* The text of a plan or graph dump (the caller frees it). */
static char *plan_dump(const vkg_plan *p, vkg_dump_format fmt, vkg_dump_layers range) {
    test_capture c;
    assert_int_equal(vkg_plan_dump_layers(p, test_capture_begin(&c), fmt, range), VKG_OK);
    test_capture_end(&c);
    return c.text;
}

static char *graph_dump(const vkg_graph *g, vkg_dump_format fmt, vkg_dump_layers range) {
    test_capture c;
    assert_int_equal(vkg_graph_dump_layers(g, test_capture_begin(&c), fmt, range), VKG_OK);
    test_capture_end(&c);
    return c.text;
}

static int count(const char *text, const char *sub) {
    int n = 0;
    for (const char *p = strstr(text, sub); p; p = strstr(p + 1, sub)) n++;
    return n;
}

/* ---- names ---------------------------------------------------------------------------------- */

/* The names of GPT-2's nodes outside the layers. */
static int top_level(const char *name) {
    static const char *const names[] = {"embed.wte", "embed.wpe", "embed.sum", "last_position", "ln_f", "logits"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i])) return 1;
    return 0;
}

/* Every op node is "h.<i>.<module>" for a layer i of the model or a top-level name, no two alike,
 * and vkg_tensor_layer reads the layer back. */
static void check_gpt2_names(const vkg_forward_graph *gg) {
    const vkg_graph *g = gg->graph;
    int per_layer[64] = {0};
    for (int i = 0; i < g->n_nodes; i++) {
        if (vkg_node_is_leaf(&g->nodes[i])) continue;
        const char *name = vkg_tensor_name(g, i);
        int layer = -1, used = 0;
        if (sscanf(name, "h.%d.%n", &layer, &used) == 1 && used > 0) {
            if (layer < 0 || layer >= gg->n_layer || !name[used]) fail_msg("node %d: '%s' names no layer", i, name);
            assert_int_equal(vkg_tensor_layer(g, i), layer);
            per_layer[layer]++;
        } else if (!top_level(name)) {
            fail_msg("node %d (%s): '%s' is neither h.<layer>.<module> nor a top-level name", i,
                     vkg_op_name(g->nodes[i].op), name);
        } else {
            assert_int_equal(vkg_tensor_layer(g, i), -1);
        }
        for (int j = 0; j < i; j++)
            if (!vkg_node_is_leaf(&g->nodes[j]) && !strcmp(vkg_tensor_name(g, j), name))
                fail_msg("nodes %d and %d are both '%s'", j, i, name);
    }
    for (int l = 1; l < gg->n_layer; l++) assert_int_equal(per_layer[l], per_layer[0]); /* same names each layer */
    assert_true(per_layer[0] > 0);
}

static void test_gpt2_names(void **state) {
    (void)state;
    vkg_gpt2 *m = load("gpt2-tiny");
    vkg_forward_options o;
    vkg_forward_graph gg;
    /* prefill with the last position's logits, prefill with all of them, decode with every
     * layer's attention and keys sliced */
    for (int variant = 0; variant < 3; variant++) {
        vkg_forward_options_default(&o, variant == 2 ? 1 : 7);
        o.all_logits = variant == 1;
        if (variant == 2) {
            o.cache_len = 32;
            o.attention_layer = VKG_ALL_LAYERS;
            o.attention_keys = 4;
        }
        build(m, &o, &gg);
        check_gpt2_names(&gg);
        const vkg_graph *g = gg.graph;
        static const char *const expected[] = {"h.1.ln_1", "h.1.attn.c_attn", "h.1.attn.q",
                                               "h.1.attn.scores", "h.1.attn.scale", "h.1.attn.mask", "h.1.attn.softmax",
                                               "h.1.attn.heads", "h.1.attn.merge", "h.1.attn.c_proj", "h.1.residual_1",
                                               "h.1.ln_2", "h.1.mlp.c_fc", "h.1.mlp.act", "h.1.mlp.c_proj",
                                               "h.1.residual_2", "embed.wte", "embed.wpe", "embed.sum", "ln_f"};
        for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
            if (vkg_find(g, expected[i]) == VKG_NONE) fail_msg("variant %d: no node '%s'", variant, expected[i]);
        assert_int_equal(vkg_find(g, "logits"), gg.logits);
        assert_string_equal(vkg_tensor_name(g, gg.logits), "logits");
        assert_int_equal(vkg_find(g, "last_position") != VKG_NONE, variant == 0);
        /* with the cache, keys and values go in as one block of the c_attn projection, a view,
         * and come back as views of the cache */
        assert_int_equal(vkg_find(g, "h.0.attn.kv_cache.write") != VKG_NONE, variant == 2);
        assert_int_equal(vkg_find(g, "h.0.attn.kv") != VKG_NONE, variant == 2);
        assert_int_equal(vkg_find(g, "h.0.attn.k_cache") != VKG_NONE, variant == 2);
        assert_int_equal(vkg_find(g, "h.0.attn.k") != VKG_NONE, variant != 2);
        assert_int_equal(vkg_find(g, "h.0.attn.v") != VKG_NONE, variant != 2);
        if (variant == 2) {
            /* The attention output keeps its output name and shows its node's name. */
            assert_int_equal(vkg_find(g, "attention.1"), gg.attention[1]);
            assert_string_equal(vkg_tensor_name(g, gg.attention[1]), "h.1.attn.softmax.slice");
        }
        vkg_forward_graph_free(&gg);
    }
    vkg_gpt2_free(m);

    /* Without the 1/sqrt(d) scale there is no scale node; relu names its own node mlp.act. */
    m = load("gpt2-config/unscaled-attn");
    vkg_forward_options_default(&o, 5);
    build(m, &o, &gg);
    check_gpt2_names(&gg);
    assert_int_equal(vkg_find(gg.graph, "h.0.attn.scale"), VKG_NONE);
    vkg_forward_graph_free(&gg);
    vkg_gpt2_free(m);
    m = load("gpt2-config/relu");
    build(m, &o, &gg);
    check_gpt2_names(&gg);
    assert_int_equal(gg.graph->nodes[vkg_find(gg.graph, "h.1.mlp.act")].op, VKG_OP_RELU);
    vkg_forward_graph_free(&gg);
    vkg_gpt2_free(m);
}

/* The lesson block names its nodes under its prefix, as PyTorch names the modules. */
static void test_block_names(void **state) {
    (void)state;
    vkg_block_config cfg = {.d_model = 16, .n_heads = 4, .d_ff = 32, .causal = 1};
    vkg_block_weights w;
    vkg_error err = {0};
    assert_int_equal(vkg_block_weights_init(&w, &cfg, 1, &err), VKG_OK);
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = vkg_input(g, "x", VKG_F32, 3, (int64_t[]){2, 5, 16});
    vkg_tensor y = vkg_block_build(g, x, &cfg, &w, "enc.0", NULL);
    assert_int_equal(vkg_output(g, "y", y), VKG_OK);
    assert_string_equal(vkg_tensor_name(g, y), "enc.0.residual_2");
    for (int i = 0; i < g->n_nodes; i++)
        if (!vkg_node_is_leaf(&g->nodes[i]) && strncmp(vkg_tensor_name(g, i), "enc.0.", 6) != 0)
            fail_msg("node %d: '%s'", i, vkg_tensor_name(g, i));
    static const char *const expected[] = {"enc.0.norm1", "enc.0.attn.in_proj", "enc.0.attn.q", "enc.0.attn.scores",
                                           "enc.0.attn.scale", "enc.0.attn.mask", "enc.0.attn.softmax", "enc.0.attn.merge",
                                           "enc.0.attn.out_proj", "enc.0.residual_1", "enc.0.norm2", "enc.0.ff.0",
                                           "enc.0.ff.1", "enc.0.ff.2"};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) assert_int_not_equal(vkg_find(g, expected[i]), VKG_NONE);
    vkg_graph_free(g);
    vkg_block_weights_free(&w);
}

/* ---- text ------------------------------------------------------------------------------------ */

/* The step line of the step computing name, or NULL. */
static const char *step_line(const char *text, const char *name, char *line, size_t size) {
    char key[96];
    snprintf(key, sizeof key, "  %s  ", name);
    const char *hit = strstr(text, key);
    if (!hit) return NULL;
    const char *start = hit, *end = strchr(hit, '\n');
    while (start > text && start[-1] != '\n') start--;
    snprintf(line, size, "%.*s", (int)(end - start), start);
    return line;
}

/* Each step line names its node, the fused ones too, and the columns line up however long the
 * names are. */
static void test_plan_text_names(void **state) {
    (void)state;
    vkg_gpt2 *m = load("gpt2-tiny");
    vkg_forward_options o;
    vkg_forward_options_default(&o, 1);
    o.cache_len = 32;
    vkg_forward_graph gg;
    build(m, &o, &gg);
    vkg_plan *p = compile(gg.graph);
    char *text = plan_dump(p, VKG_DUMP_TEXT, VKG_DUMP_ALL_LAYERS);
    char line[512];
    /* no probabilities asked for: scores, softmax and the product are one attention step */
    assert_non_null(step_line(text, "h.1.attn.heads", line, sizeof line));
    assert_non_null(strstr(line, "attention+scale+causal"));
    assert_non_null(step_line(text, "h.0.attn.kv_cache.write", line, sizeof line));
    assert_non_null(strstr(line, "write_at"));
    /* a decode step: per layer one write of keys and values, no other copy */
    int writes = 0, copies = 0;
    for (const char *l = strstr(text, "\nsteps"); (l = strchr(l + 1, '\n')) != NULL;) {
        writes += !strncmp(l + strspn(l, "\n 0123456789|*"), "write_at ", 9);
        copies += !strncmp(l + strspn(l, "\n 0123456789|*"), "copy ", 5);
    }
    assert_int_equal(writes, 2);
    assert_int_equal(copies, 0);
    assert_non_null(step_line(text, "h.1.mlp.act", line, sizeof line));
    assert_non_null(strstr(line, "matmul+bias+gelu"));
    assert_non_null(step_line(text, "h.1.residual_2", line, sizeof line));
    assert_non_null(strstr(line, "matmul+bias+residual"));
    /* The shape column starts at the same place on every step line. */
    int column = -1, lines = 0;
    for (const char *l = strstr(text, "\nsteps") + 1; (l = strchr(l, '\n')) && l[1]; lines++) {
        l++;
        const char *shape = strstr(l, "  [");
        assert_non_null(shape);
        if (column < 0) column = (int)(shape - l);
        assert_int_equal((int)(shape - l), column);
    }
    assert_int_equal(lines, vkg_plan_step_count(p));
    free(text);

    /* JSON names the node of each step and its layer. */
    text = plan_dump(p, VKG_DUMP_JSON, VKG_DUMP_ALL_LAYERS);
    assert_non_null(strstr(text, "\"node\": \"h.1.attn.heads\", \"layer\": 1,"));
    assert_non_null(strstr(text, "\"node\": \"logits\", \"layer\": null,"));
    free(text);
    text = graph_dump(gg.graph, VKG_DUMP_JSON, VKG_DUMP_ALL_LAYERS);
    assert_non_null(strstr(text, "\"name\": \"h.0.attn.c_attn\", \"layer\": 0,"));
    assert_non_null(strstr(text, "\"output\": true, \"output_name\": \"logits\""));
    free(text);
    vkg_plan_free(p);
    vkg_forward_graph_free(&gg);
    vkg_gpt2_free(m);
}

/* ---- DOT ------------------------------------------------------------------------------------- */

typedef struct dot_graph {
    int n_edges, n_nodes;
    char from[1024][24], to[1024][24];
    char node[2048][24];
} dot_graph;

/* The node ids and edges of a DOT text as the dumps write it (one statement a line). */
static void dot_parse(const char *text, dot_graph *d) {
    d->n_edges = d->n_nodes = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        char a[24], b[24];
        int end = 0;
        if (sscanf(l, " %23[a-z0-9_] -> %23[a-z0-9_]", a, b) == 2) {
            assert_true(d->n_edges < 1024);
            strcpy(d->from[d->n_edges], a);
            strcpy(d->to[d->n_edges++], b);
        } else if (sscanf(l, " %23[a-z0-9_] [label=%n", a, &end) == 1 && end > 0) {
            assert_true(d->n_nodes < 2048);
            strcpy(d->node[d->n_nodes++], a);
        }
    }
}

static int dot_degree(const dot_graph *d, const char *id) {
    int n = 0;
    for (int e = 0; e < d->n_edges; e++) n += !strcmp(d->from[e], id) + !strcmp(d->to[e], id);
    return n;
}

static int dot_has_edge(const dot_graph *d, int from, int to) {
    char a[24], b[24];
    snprintf(a, sizeof a, "s%d", from);
    snprintf(b, sizeof b, "s%d", to);
    for (int e = 0; e < d->n_edges; e++)
        if (!strcmp(d->from[e], a) && !strcmp(d->to[e], b)) return 1;
    return 0;
}

static int step_of(const vkg_plan *p, const char *name) {
    for (int s = 0; s < p->n_steps; s++)
        if (!strcmp(vkg_tensor_name(p->graph, p->steps[s].node), name)) return s;
    fail_msg("no step computes '%s'", name);
    return -1;
}

/* No node carries more than a few edges (steps read at most five bindings, and their outputs go
 * to few readers), whether it is declared or only named by an edge; a leaf has exactly one edge. */
static void check_no_hub(const dot_graph *d, int max_degree) {
    for (int e = 0; e < 2 * d->n_edges; e++) {
        const char *id = e < d->n_edges ? d->from[e] : d->to[e - d->n_edges];
        int deg = dot_degree(d, id);
        if (deg > max_degree) fail_msg("node %s has %d edges", id, deg);
        if (id[0] != 's' && id[0] != 'n') assert_int_equal(deg, 1);
    }
}

static void test_plan_dot(void **state) {
    (void)state;
    vkg_gpt2 *m = load("gpt2-tiny");
    for (int decode = 0; decode < 2; decode++) {
        vkg_forward_options o;
        vkg_forward_options_default(&o, decode ? 1 : 6);
        o.cache_len = decode ? 32 : 0;
        vkg_forward_graph gg;
        build(m, &o, &gg);
        vkg_plan *p = compile(gg.graph);
        char *text = plan_dump(p, VKG_DUMP_DOT, VKG_DUMP_ALL_LAYERS);
        assert_int_equal(count(text, "subgraph cluster_layer"), 2);
        assert_int_equal(count(text, "subgraph cluster_layer0 {"), 1);
        assert_int_equal(count(text, "label=\"layer 1\""), 1);
        assert_null(strstr(text, "constant"));          /* weights are not drawn */
        dot_graph *d = malloc(sizeof *d);
        dot_parse(text, d);
        /* One node per step, edges forward in step order, only between steps or from a leaf. */
        int steps = 0;
        for (int i = 0; i < d->n_nodes; i++) steps += d->node[i][0] == 's';
        assert_int_equal(steps, p->n_steps);
        for (int e = 0; e < d->n_edges; e++) {
            int a, b;
            if (sscanf(d->from[e], "s%d", &a) == 1 && sscanf(d->to[e], "s%d", &b) == 1) assert_true(a < b);
            else assert_true(d->to[e][0] == 's' || d->from[e][0] == 's');
        }
        check_no_hub(d, 6);
        /* The data flow: the projection -> fused attention (scores, softmax and the product in one
         * step); the residual stream from layer to layer. */
        int ln = step_of(p, "h.1.ln_1"), res = step_of(p, "h.0.residual_2");
        assert_true(dot_has_edge(d, step_of(p, "h.0.attn.c_attn"), step_of(p, "h.0.attn.heads")));
        assert_true(dot_has_edge(d, res, ln));
        /* The arena bytes h.1.ln_1 reads were written by many steps before; only the last writer
         * counts, so h.0.residual_2 is its one source. */
        char to[24];
        snprintf(to, sizeof to, "s%d", ln);
        int into = 0;
        for (int e = 0; e < d->n_edges; e++) into += !strcmp(d->to[e], to);
        assert_int_equal(into, 1);
        if (decode) {
            /* The cache write feeds attention through the state, and the position is a leaf per reader. */
            assert_true(dot_has_edge(d, step_of(p, "h.1.attn.kv_cache.write"), step_of(p, "h.1.attn.heads")));
            assert_non_null(strstr(text, "[label=\"state(h.1.kv_cache)+0:"));
            assert_true(count(text, "[label=\"index pos\"") >= 4);
        }
        free(d);
        free(text);

        /* The graph DOT: a cluster per layer, weights as leaves beside their one reader. */
        text = graph_dump(gg.graph, VKG_DUMP_DOT, VKG_DUMP_ALL_LAYERS);
        assert_int_equal(count(text, "subgraph cluster_layer"), 2);
        d = malloc(sizeof *d);
        dot_parse(text, d);
        check_no_hub(d, 6);
        assert_true(count(text, "label=\"constant h.0.attn.c_attn.weight\"") == 1);
        assert_true(count(text, "label=\"constant wte.weight\"") == 2); /* the tied head: one per reader */
        free(d);
        free(text);
        vkg_plan_free(p);
        vkg_forward_graph_free(&gg);
    }
    vkg_gpt2_free(m);
}

/* ---- ranges of layers ------------------------------------------------------------------------ */

static void test_layer_ranges(void **state) {
    (void)state;
    vkg_gpt2 *m = load("gpt2-tiny");
    vkg_forward_options o;
    vkg_forward_options_default(&o, 4);
    vkg_forward_graph gg;
    build(m, &o, &gg);
    vkg_plan *p = compile(gg.graph);
    assert_int_equal(vkg_graph_layer_count(gg.graph), 2);

    char *text = plan_dump(p, VKG_DUMP_TEXT, (vkg_dump_layers){1, 2});
    assert_non_null(strstr(text, "layer 1 of 2 with the head:"));
    assert_null(strstr(text, "h.0."));
    assert_null(strstr(text, "embed."));
    assert_non_null(strstr(text, "  h.1.attn.heads  "));
    assert_non_null(strstr(text, "  ln_f  "));
    assert_non_null(strstr(text, "  logits  "));
    assert_null(strstr(text, "h.0.ln_1.weight")); /* regions only of the steps shown */
    free(text);

    text = plan_dump(p, VKG_DUMP_TEXT, (vkg_dump_layers){0, 1});
    assert_non_null(strstr(text, "layer 0 of 2 with the embedding:"));
    assert_non_null(strstr(text, "  embed.sum  "));
    assert_non_null(strstr(text, "  h.0.mlp.act  "));
    assert_null(strstr(text, "  h.1."));
    assert_null(strstr(text, "  ln_f  "));
    free(text);

    /* The DOT of one layer: its cluster only; what it reads from outside is a leaf per reader. */
    text = plan_dump(p, VKG_DUMP_DOT, (vkg_dump_layers){1, 2});
    assert_int_equal(count(text, "subgraph cluster_layer"), 1);
    assert_non_null(strstr(text, "subgraph cluster_layer1 {"));
    assert_non_null(strstr(text, "\\nh.0.residual_2\""));  /* the leaf that stands for the step before */
    free(text);

    /* The graph: layer 0's ops and the leaves they read, nothing of layer 1. */
    text = graph_dump(gg.graph, VKG_DUMP_TEXT, (vkg_dump_layers){0, 1});
    assert_non_null(strstr(text, "layer 0 of 2 with the embedding"));
    assert_non_null(strstr(text, " h.0.ln_1.weight "));
    assert_non_null(strstr(text, " embed.wte "));
    assert_null(strstr(text, "h.1."));
    assert_null(strstr(text, "ln_f"));
    free(text);
    text = graph_dump(gg.graph, VKG_DUMP_JSON, (vkg_dump_layers){1, 2});
    assert_null(strstr(text, "\"layer\": 0"));
    assert_non_null(strstr(text, "\"name\": \"logits\""));
    assert_non_null(strstr(text, "\"name\": \"wte.weight\"")); /* the tied head reads it */
    free(text);
    vkg_plan_free(p);
    vkg_forward_graph_free(&gg);
    vkg_gpt2_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_names),
        cmocka_unit_test(test_block_names),
        cmocka_unit_test(test_plan_text_names),
        cmocka_unit_test(test_plan_dot),
        cmocka_unit_test(test_layer_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
