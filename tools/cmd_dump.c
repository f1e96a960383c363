/* vkgraph dump: print a model's graph or its compiled plan as text, DOT or JSON. */
#include "cli.h"
#include "commands.h"
#include "vkgraph_lesson.h"
#include "vkgraph_model.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: vkgraph dump (--example block [--batch B] [--seq T] [--causal]\n"
               "                    | -m DIR [--seq T | --decode [--ctx N]] [--layers A:B])\n"
               "                    [--plan] [--format text|dot|json] [--no-fuse] [--no-inplace] [--device D]\n"
               "  --example block  the lesson's transformer block (d_model 64, 4 heads, d_ff 256) over an\n"
               "                   input [B, T, 64] (default [2, 10, 64])\n"
               "  -m DIR           a model folder: its forward pass over --seq tokens (default 10); with\n"
               "                   --decode, the one-token decode step over a KV cache of the context\n"
               "  --ctx N          that cache's positions (default: the model's context; with --plan,\n"
               "                   where no binding holds a cache that long, the largest half, quarter,\n"
               "                   ... that one does, as a context left to the model takes)\n"
               "  --layers A:B     only layers A to B-1 (indices from 0, as --layer takes them; A:, :B and\n"
               "                   A alone work too), with the embedding when A is 0 and the head when B\n"
               "                   is the layer count\n"
               "  --plan           the compiled plan (steps, buffers, arena) instead of the graph\n"
               "  --device D       compile for that device's limits (default: portable limits)\n");
}

/* A whole number in text[0, len), or -1. */
static long layer_number(const char *text, size_t len) {
    long v = 0;
    if (!len || len > 9) return -1;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9') return -1;
        v = v * 10 + (text[i] - '0');
    }
    return v;
}

/* --layers "A:B" (layers A to B-1), "A:", ":B" or "A" into *out, for a model of n layers; 1
 * after a message when it is malformed or names layers the model does not have. */
static int parse_layers(const char *text, int n, vkg_dump_layers *out) {
    const char *colon = strchr(text, ':');
    size_t la = colon ? (size_t)(colon - text) : strlen(text);
    long a = la ? layer_number(text, la) : 0, b = !colon ? a + 1 : colon[1] ? layer_number(colon + 1, strlen(colon + 1)) : n;
    if (a < 0 || b < 0 || (!la && !colon))
        return cli_fail("dump", "--layers '%s': expected A:B (layers A to B-1), A:, :B or A, with whole numbers", text);
    if (a >= n || b > n || a >= b)
        return cli_fail("dump", "--layers %s: the model has %d layers, indices 0 to %d; A:B takes layers A to B-1, "
                        "so 0 <= A < B <= %d", text, n, n - 1, n);
    *out = (vkg_dump_layers){(int)a, (int)b};
    return 0;
}

int cmd_dump(int argc, char **argv) {
    const char *example = NULL, *format = "text", *device = NULL, *model_dir = NULL, *layers = NULL;
    int plan = 0, causal = 0, decode = 0, seq_given = 0, batch_given = 0;
    long batch = 2, seq = 10, ctx = 0;
    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--example")) { if (!(example = cli_value("dump", argc, argv, &i))) return 1; }
        else if (!strcmp(a, "--format")) { if (!(format = cli_value("dump", argc, argv, &i))) return 1; }
        else if (!strcmp(a, "--device")) { if (!(device = cli_value("dump", argc, argv, &i))) return 1; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(model_dir = cli_value("dump", argc, argv, &i))) return 1; }
        else if (!strcmp(a, "--layers")) { if (!(layers = cli_value("dump", argc, argv, &i))) return 1; }
        else if (!strcmp(a, "--plan")) plan = 1;
        else if (!strcmp(a, "--decode")) decode = 1;
        else if (!strcmp(a, "--causal")) causal = 1;
        else if (!strcmp(a, "--no-fuse")) opts.fuse = 0;
        else if (!strcmp(a, "--no-inplace")) opts.in_place = 0;
        else if (!strcmp(a, "--ctx")) {
            const char *v = cli_value("dump", argc, argv, &i);
            if (!v || cli_int("dump", a, v, 1, 1L << 30, &ctx)) return 1;
        } else if (!strcmp(a, "--batch") || !strcmp(a, "--seq")) {
            const char *v = cli_value("dump", argc, argv, &i);
            if (!v || cli_int("dump", a, v, 1, 1 << 16, !strcmp(a, "--batch") ? &batch : &seq)) return 1;
            *(!strcmp(a, "--batch") ? &batch_given : &seq_given) = 1;
        } else {
            return cli_unknown_option("dump", a, usage);
        }
    }
    vkg_dump_format fmt = !strcmp(format, "text") ? VKG_DUMP_TEXT : !strcmp(format, "dot") ? VKG_DUMP_DOT
                        : !strcmp(format, "json") ? VKG_DUMP_JSON : (vkg_dump_format)-1;
    static const char *const formats[] = {"text", "dot", "json"};
    if ((int)fmt < 0) return cli_unknown_value("dump", "--format", format, formats, 3);
    if (!example == !model_dir) {
        usage(stderr);
        return cli_fail("dump", "say what to dump: --example block or -m DIR");
    }
    static const char *const examples[] = {"block"};
    if (example && strcmp(example, "block") != 0) return cli_unknown_value("dump", "--example", example, examples, 1);
    /* Options that would change nothing are refused, so that no dump is mistaken for another. */
    if (example && decode)
        return cli_fail("dump", "--decode needs -m DIR: the lesson block has no KV cache (--seq T sets its input length)");
    if (example && layers) return cli_fail("dump", "--layers needs -m DIR: the lesson block is one block");
    if (model_dir && (batch_given || causal))
        return cli_fail("dump", "%s is for --example block: a model runs one sequence, always causal",
                        batch_given ? "--batch" : "--causal");
    if (decode && seq_given) return cli_fail("dump", "--seq and --decode together: the decode step takes one token");
    if (ctx && !decode) return cli_fail("dump", "--ctx needs --decode: a forward pass has no KV cache");

    int rc = 1;
    vkg_error err = {0};
    vkg_block_config cfg = {.d_model = 64, .n_heads = 4, .d_ff = 256, .causal = causal};
    vkg_block_weights w = {0};
    vkg_model *model = NULL;
    vkg_graph *g = NULL;
    vkg_plan *p = NULL;
    vkg_device *dev = NULL;
    vkg_dump_layers range = VKG_DUMP_ALL_LAYERS;
    vkg_model_graph_options o;
    vkg_model_graph_options_default(&o, decode ? 1 : (int)seq);
    vkg_model_info info = {0};
    if (model_dir) {
        vkg_model_options mo;
        vkg_model_options_default(&mo);
        mo.no_tokenizer = 1; /* a graph of ids */
        if (vkg_model_open(model_dir, NULL, &mo, &model, &err) != VKG_OK || vkg_model_get_info(model, &info, &err) != VKG_OK) {
            vkg_model_free(model);
            return cli_fail("dump", "%s", err.message);
        }
        if (ctx > info.n_ctx) {
            vkg_model_free(model);
            return cli_fail("dump", "--ctx %ld: the model's context holds %d positions", ctx, info.n_ctx);
        }
        if (decode) o.n_ctx = ctx ? (int)ctx : info.n_ctx;
        if (vkg_model_build_graph(model, &o, &g, &err) != VKG_OK) {
            vkg_model_free(model);
            return cli_fail("dump", "%s", err.message);
        }
        if (layers && parse_layers(layers, info.n_layer, &range)) {
            vkg_graph_free(g);
            vkg_model_free(model);
            return 1;
        }
    } else {
        if (vkg_block_weights_init(&w, &cfg, 0, &err) != VKG_OK) return cli_fail("dump", "%s", err.message);
        if (!(g = vkg_graph_new())) {
            vkg_block_weights_free(&w);
            return cli_fail("dump", "out of memory");
        }
        vkg_tensor x = vkg_input(g, "x", VKG_F32, 3, (int64_t[]){batch, seq, cfg.d_model});
        vkg_output(g, "y", vkg_block_build(g, x, &cfg, &w, "block", NULL));
    }
    if (vkg_graph_status(g) != VKG_OK) {
        cli_fail("dump", "%s", vkg_graph_error(g));
    } else if (!plan) {
        rc = vkg_graph_dump_layers(g, stdout, fmt, range) != VKG_OK;
    } else if (device && cli_open_device("dump", device, 0, &dev)) {
        rc = 1;
    } else {
        if (dev) vkg_device_compile_options(dev, &opts);
        vkg_status st;
        if (decode && !ctx) { /* the model's whole context, or what a context left to it would take */
            vkg_graph_free(g);
            g = NULL;
            st = vkg_model_compile_fitted(model, &o, &opts, &g, &p, &err);
        } else {
            st = vkg_plan_compile(g, &opts, &p, &err);
        }
        if (st != VKG_OK) {
            cli_fail("dump", "%s", err.message);
        } else {
            if (decode) cli_note_context("dump", (int)ctx, o.n_ctx, info.n_ctx, "--ctx N sets it", dev);
            rc = vkg_plan_dump_layers(p, stdout, fmt, range) != VKG_OK;
        }
    }
    vkg_plan_free(p);
    cli_close_device("dump", dev);
    vkg_graph_free(g);
    vkg_model_free(model);
    vkg_block_weights_free(&w);
    return rc;
}
