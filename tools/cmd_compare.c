/* vkgraph compare: one plan run step by step on two devices, every step's output compared on
 * the reference's inputs (with the free-running drift beside it), and the first step whose
 * difference crosses its op's conformance threshold named.  The tool for "the logits differ on
 * this GPU": it says which step, which op, which shape and which element. */
#include "cli.h"
#include "commands.h"
#include "gpt2_cli.h"
#include "vkgraph_lesson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "compare"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph compare (-m DIR (-p TEXT | -f FILE | --ids IDS) [--decode [--batch N]] | --example block)\n"
            "                       [--device D] [--against D] [--quiet]\n"
            "\n"
            "Runs one compiled plan step by step on device D (default: the best Vulkan device) and on the\n"
            "reference (default: the CPU executor).  Each step is judged on its own inputs: before D runs\n"
            "it, the bytes it reads (weights aside) are set from the reference, and what it wrote is\n"
            "compared by normalized mean squared error against its op's threshold (1e-06 fused attention,\n"
            "5e-04 matmul, 1e-07 every other step).  Beside it, the drift: the same measure for D running\n"
            "the whole plan on its own values, as a plain run does (shown, not judged).  Names the first\n"
            "step over its threshold, with the element that differs most; exits 1 when there is one.\n"
            "The table and its columns: docs/COMPARE.md.\n"
            "\n");
    gpt2_cli_usage_common(f);
    fprintf(f,
            "  --decode            compare one decode step instead of the forward pass: the prompt's\n"
            "                      tokens but the last fill the KV cache (a prefill run on each device\n"
            "                      by itself), then the plan of one token at the last position runs\n"
            "  --batch N           with --decode: one batched decode step of N sequences (2 to 64, at most\n"
            "                      the prompt's tokens - 1), as a batch context runs it: sequence r is the\n"
            "                      prompt's first n-1-r*k tokens (k as wide as leaves each one token),\n"
            "                      prefilled alone into slot r on each device, and row r of the step is\n"
            "                      its next token, at its own position\n"
            "  --example block     the lesson's transformer block (d_model 64, 4 heads, d_ff 256, [2, 10, 64])\n"
            "  --against D         the reference device (default: cpu)\n"
            "  -q, --quiet         print only the steps that cross their threshold, the drift line and the verdict\n"
            "  -h, --help          show this help\n");
}

static int shows_element(const vkg_step_comparison *c) {
    return c->worst_ndim > 0 && (c->max_abs_diff > 0 || c->nonfinite_mismatches > 0);
}

/* Where the worst element is, "[3, 320, 17]", or "-" when nothing differs. */
static const char *coords(const vkg_step_comparison *c, char *buf, size_t size) {
    return shows_element(c) ? vkg_shape_str(c->worst_ndim, c->worst, buf, size) : "-";
}

static const char *shape_text(const vkg_step_comparison *c, char *buf, size_t size) {
    return vkg_shape_str(c->ndim, c->shape, buf, size);
}

static void print_step(const vkg_step_comparison *c, FILE *f) {
    char at[96], shape[96];
    fprintf(f, "%4d  %-24s %-24s %-18s %10.3e  %9.0e  %10.3e  %10.3e  %10.3e  %-18s", c->step, c->label, c->node,
            shape_text(c, shape, sizeof shape), c->nmse, c->threshold, c->max_abs_diff, c->drift_nmse,
            c->drift_max_abs_diff, coords(c, at, sizeof at));
    if (shows_element(c)) fprintf(f, " %12.6g %12.6g", (double)c->worst_value, (double)c->worst_reference);
    else fprintf(f, " %12s %12s", "", "");
    if (c->nonfinite_mismatches) fprintf(f, "  %lld inf/nan mismatches", (long long)c->nonfinite_mismatches);
    fprintf(f, "%s\n", c->fails ? "  FAIL" : "");
}

/* The drift's summary: where it is largest and what the last step (the model's output) carries. */
static void print_drift(const vkg_step_comparison *cmp, int n) {
    if (n == 0) return;
    int worst = 0;
    for (int i = 1; i < n; i++)
        if (cmp[i].drift_nmse > cmp[worst].drift_nmse) worst = i;
    int64_t nonfinite = 0;
    for (int i = 0; i < n; i++) nonfinite += cmp[i].drift_nonfinite_mismatches;
    printf("drift (running freely): largest nmse %.3e at step %d, %s (node '%s'); last step %.3e", cmp[worst].drift_nmse,
           worst, cmp[worst].label, cmp[worst].node, cmp[n - 1].drift_nmse);
    if (nonfinite) printf("; %lld inf/nan mismatches", (long long)nonfinite);
    printf("\n");
}

/* Prints the table and the verdict; returns the exit status. */
static int report(const vkg_step_comparison *cmp, int n, int first, int quiet) {
    printf("step  %-24s %-24s %-18s %10s  %9s  %10s  %10s  %10s  %-18s %12s %12s\n", "op", "node", "shape", "nmse",
           "threshold", "max |diff|", "drift nmse", "drift |d|", "worst at", "value", "reference");
    for (int i = 0; i < n; i++)
        if (!quiet || cmp[i].fails) print_step(&cmp[i], stdout);
    print_drift(cmp, n);
    if (first < 0) {
        int worst = 0;
        for (int i = 1; i < n; i++)
            if (cmp[i].nmse / cmp[i].threshold > cmp[worst].nmse / cmp[worst].threshold) worst = i;
        printf("all %d steps within their thresholds on their own inputs", n);
        if (n) printf(" (closest: step %d, %s, nmse %.3e of %.0e)", worst, cmp[worst].label, cmp[worst].nmse,
                      cmp[worst].threshold);
        printf("\n");
        return 0;
    }
    const vkg_step_comparison *c = &cmp[first];
    char at[96], shape[96];
    printf("first step over its threshold: step %d, %s %s (node '%s'): nmse %.3e > %.0e", c->step, c->label,
           shape_text(c, shape, sizeof shape), c->node, c->nmse, c->threshold);
    if (c->nonfinite_mismatches) printf(", %lld inf/nan mismatches", (long long)c->nonfinite_mismatches);
    if (shows_element(c))
        printf("; worst at %s: %.6g against %.6g", coords(c, at, sizeof at), (double)c->worst_value,
               (double)c->worst_reference);
    printf("\n");
    return 1;
}

/* Fills a session before the comparison: its inputs, indices and states. */
typedef vkg_status (*set_inputs_fn)(vkg_session *s, vkg_device *d, void *arg, vkg_error *err);

/* Compiles g once for the limits of both devices, opens a session on each, lets set fill them,
 * and compares.  Returns the exit status. */
static int compare_graph(vkg_graph *g, vkg_device *test, vkg_device *ref, set_inputs_fn set, void *arg,
                         const char *what, int quiet) {
    vkg_compile_options o;
    vkg_compile_options_default(&o);
    vkg_device_compile_options(test, &o);
    vkg_device_compile_options(ref, &o);
    vkg_error err = {0};
    vkg_plan *p = NULL;
    vkg_session *st = NULL, *sr = NULL;
    vkg_step_comparison *cmp = NULL;
    int first = -1, rc = 1;
    if (vkg_plan_compile(g, &o, &p, &err) == VKG_OK && vkg_session_new(test, p, &st, &err) == VKG_OK &&
        vkg_session_new(ref, p, &sr, &err) == VKG_OK && set(st, test, arg, &err) == VKG_OK &&
        set(sr, ref, arg, &err) == VKG_OK && vkg_session_compare(st, sr, &cmp, &first, &err) == VKG_OK) {
        printf("%s on %s against %s: %d steps\n", what, vkg_device_name(test), vkg_device_name(ref),
               vkg_plan_step_count(p));
        rc = report(cmp, vkg_plan_step_count(p), first, quiet);
    } else {
        cli_fail(CMD, "%s", err.message);
    }
    free(cmp);
    vkg_session_free(st);
    vkg_session_free(sr);
    vkg_plan_free(p);
    return rc;
}

/* ---- a model --------------------------------------------------------------------------------- */

/* One run's tokens: graph's inputs "ids" and "positions" and its runtime indices, "pos" (the
 * tokens already cached: the first position) or a batched decode plan's "pos.<r>" (row r's own
 * position).  A prefill's plan runs on each device by itself, before the plan compared. */
typedef struct token_run {
    const vkg_graph *graph;
    const vkg_plan *plan;          /* a prefill's; the plan compared is compare_graph's */
    const int32_t *ids, *positions;
    size_t n;
} token_run;

typedef struct model_inputs {
    token_run run;                 /* the plan compared */
    const token_run *prefills;     /* run first, filling the caches that run reads */
    int n_prefills;
} model_inputs;

static vkg_status set_tokens(vkg_session *s, const token_run *r, vkg_error *err) {
    const vkg_graph *g = r->graph;
    vkg_status st = vkg_session_set_input(s, vkg_find(g, "ids"), r->ids, r->n * sizeof *r->ids, err);
    if (st == VKG_OK)
        st = vkg_session_set_input(s, vkg_find(g, "positions"), r->positions, r->n * sizeof *r->positions, err);
    const vkg_tensor pos = vkg_find(g, "pos");
    if (st == VKG_OK && pos != VKG_NONE) st = vkg_session_set_index(s, pos, r->positions[0], err);
    if (pos != VKG_NONE || vkg_find(g, "pos.0") == VKG_NONE) return st;
    for (size_t i = 0; st == VKG_OK && i < r->n; i++) {
        char name[32];
        snprintf(name, sizeof name, "pos.%zu", i);
        st = vkg_session_set_index(s, vkg_find(g, name), r->positions[i], err);
    }
    return st;
}

/* The prefill's session shares the weights and the KV caches with s; it runs once and goes, and
 * the cache it filled stays s's. */
static vkg_status prefill(vkg_session *s, vkg_device *d, const token_run *r, vkg_error *err) {
    vkg_session *ps = NULL;
    vkg_status st = vkg_session_new_shared(d, r->plan, s, &ps, err);
    if (st == VKG_OK) st = set_tokens(ps, r, err);
    if (st == VKG_OK) st = vkg_session_run(ps, err);
    vkg_session_free(ps);
    return st;
}

static vkg_status set_model(vkg_session *s, vkg_device *d, void *arg, vkg_error *err) {
    const model_inputs *in = arg;
    vkg_status st = VKG_OK;
    for (int i = 0; st == VKG_OK && i < in->n_prefills; i++) st = prefill(s, d, &in->prefills[i], err);
    return st == VKG_OK ? set_tokens(s, &in->run, err) : st;
}

/* The forward pass over every id, logits at every position. */
static int compare_forward(gpt2_cli *c, vkg_device *ref, int32_t *positions, int quiet) {
    vkg_model_graph_options o;
    vkg_model_graph_options_default(&o, (int)c->n_ids);
    o.logits = VKG_LOGITS_ALL;
    vkg_graph *g = NULL;
    vkg_error err = {0};
    if (vkg_model_build_graph(c->model, &o, &g, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    model_inputs in = {.run = {.graph = g, .ids = c->ids, .positions = positions, .n = c->n_ids}};
    char what[128];
    snprintf(what, sizeof what, "%s forward pass over %zu tokens (logits at every position)", gpt2_cli_model_name(c),
             c->n_ids);
    int rc = compare_graph(g, c->dev, ref, set_model, &in, what, quiet);
    vkg_graph_free(g);
    return rc;
}

/* A decode step of `rows` sequences over caches of the prompt's n positions.  Sequence r holds
 * the prompt's first prefix_length(n, rows, r) tokens, and its row is the token after them: one
 * row decodes the last token over the n - 1 before it; several sit spread across the cache, the
 * spread as wide as leaves the last sequence one token, so that every row attends over a cache
 * of its own length at a position of its own. */
static int prefix_length(int n, int rows, int r) {
    const int spread = rows > 1 ? (n - 2) / (rows - 1) : 0;
    return n - 1 - r * spread;
}

/* The plans of a decode comparison: the step's and one prefill per sequence, each sequence
 * prefilled alone into its own slot (a batch context prefills the same way). */
typedef struct decode_plans {
    int rows;
    vkg_graph *g;
    vkg_graph **prefill_graphs;
    vkg_plan **prefill_plans;
    token_run *prefills;
    int32_t *ids, *positions;          /* [rows]: the step's tokens */
} decode_plans;

static void decode_plans_free(decode_plans *d) {
    for (int r = 0; r < d->rows && d->prefill_plans; r++) vkg_plan_free(d->prefill_plans[r]);
    for (int r = 0; r < d->rows && d->prefill_graphs; r++) vkg_graph_free(d->prefill_graphs[r]);
    vkg_graph_free(d->g);
    free(d->prefill_graphs);
    free(d->prefill_plans);
    free(d->prefills);
    free(d->ids);
    free(d->positions);
}

/* With one row, the model's plain cache; with several, slot r is row r's (seqs = rows).  0, or 1
 * after the message. */
static int decode_plans_build(gpt2_cli *c, vkg_device *ref, const int32_t *positions, decode_plans *d) {
    const int n = (int)c->n_ids, rows = d->rows, batched = rows > 1;
    vkg_compile_options co;
    vkg_compile_options_default(&co);
    vkg_device_compile_options(c->dev, &co);
    vkg_device_compile_options(ref, &co);
    d->prefill_graphs = calloc((size_t)rows, sizeof *d->prefill_graphs);
    d->prefill_plans = calloc((size_t)rows, sizeof *d->prefill_plans);
    d->prefills = calloc((size_t)rows, sizeof *d->prefills);
    d->ids = malloc((size_t)rows * sizeof *d->ids);
    d->positions = malloc((size_t)rows * sizeof *d->positions);
    if (!d->prefill_graphs || !d->prefill_plans || !d->prefills || !d->ids || !d->positions)
        return cli_fail(CMD, "out of memory");
    vkg_error err = {0};
    vkg_model_graph_options o;
    vkg_model_graph_options_default(&o, rows);
    o.n_ctx = n;
    o.seqs = batched ? rows : 0;
    o.n_slots = batched ? rows : 0;
    vkg_status st = vkg_model_build_graph(c->model, &o, &d->g, &err);
    for (int r = 0; st == VKG_OK && r < rows; r++) {
        const int length = prefix_length(n, rows, r);
        d->ids[r] = c->ids[length];
        d->positions[r] = positions[length];
        vkg_model_graph_options_default(&o, length);
        o.n_ctx = n;
        o.seqs = batched;
        o.first_slot = batched ? r : 0;
        o.n_slots = batched ? rows : 0;
        st = vkg_model_build_graph(c->model, &o, &d->prefill_graphs[r], &err);
        if (st == VKG_OK) st = vkg_plan_compile(d->prefill_graphs[r], &co, &d->prefill_plans[r], &err);
        d->prefills[r] = (token_run){.graph = d->prefill_graphs[r], .plan = d->prefill_plans[r], .ids = c->ids,
                                     .positions = positions, .n = (size_t)length};
    }
    return st == VKG_OK ? 0 : cli_fail(CMD, "%s", err.message);
}

static int compare_decode(gpt2_cli *c, vkg_device *ref, int32_t *positions, int rows, int quiet) {
    const int n = (int)c->n_ids;
    if (n < 2) return cli_fail(CMD, "--decode needs at least 2 tokens (the prefill, then the one decoded)");
    if (rows > n - 1)
        return cli_fail(CMD, "--batch %d needs a prompt of at least %d tokens (each of the %d sequences prefills at "
                        "least one before the token it decodes); this one has %d", rows, rows + 1, rows, n);
    decode_plans d = {.rows = rows};
    int rc = 1;
    if (decode_plans_build(c, ref, positions, &d) == 0) {
        model_inputs in = {.run = {.graph = d.g, .ids = d.ids, .positions = d.positions, .n = (size_t)rows},
                           .prefills = d.prefills, .n_prefills = rows};
        char what[256];
        if (rows == 1)
            snprintf(what, sizeof what, "%s decode step at position %d over a KV cache of %d positions (%d prefilled)",
                     gpt2_cli_model_name(c), n - 1, n, n - 1);
        else
            snprintf(what, sizeof what, "%s batched decode step of %d sequences over KV caches of %d positions: "
                     "rows at positions %d down to %d, %d apart (each sequence prefilled alone into its own slot)",
                     gpt2_cli_model_name(c), rows, n, d.positions[0], d.positions[rows - 1],
                     d.positions[0] - d.positions[1]);
        rc = compare_graph(d.g, c->dev, ref, set_model, &in, what, quiet);
    }
    decode_plans_free(&d);
    return rc;
}

/* rows: 0 for the forward pass, else a decode step of that many sequences. */
static int compare_model(gpt2_cli *c, vkg_device *ref, int rows, int quiet) {
    int32_t *positions = malloc(c->n_ids * sizeof *positions);
    if (!positions) return cli_fail(CMD, "out of memory");
    for (size_t i = 0; i < c->n_ids; i++) positions[i] = (int32_t)i;
    int rc = rows ? compare_decode(c, ref, positions, rows, quiet) : compare_forward(c, ref, positions, quiet);
    free(positions);
    return rc;
}

/* ---- the lesson block ------------------------------------------------------------------------ */

typedef struct block_inputs {
    vkg_tensor x;
    const float *data;
    size_t floats;
} block_inputs;

static vkg_status set_block(vkg_session *s, vkg_device *d, void *arg, vkg_error *err) {
    (void)d;
    const block_inputs *in = arg;
    return vkg_session_set_input(s, in->x, in->data, in->floats * sizeof *in->data, err);
}

static int compare_block(vkg_device *test, vkg_device *ref, int quiet) {
    enum { B = 2, T = 10 };
    vkg_block_config cfg = {.d_model = 64, .n_heads = 4, .d_ff = 256, .causal = 0};
    vkg_block_weights w = {0};
    vkg_error err = {0};
    if (vkg_block_weights_init(&w, &cfg, 0, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    vkg_graph *g = vkg_graph_new();
    float x[B * T * 64];
    vkg_rng rng;
    vkg_rng_seed(&rng, 1);
    vkg_rng_fill_normal(&rng, x, sizeof x / sizeof x[0], 1.0f);
    int rc = 1;
    if (!g) {
        cli_fail(CMD, "out of memory");
    } else {
        vkg_tensor in = vkg_input(g, "x", VKG_F32, 3, (int64_t[]){B, T, cfg.d_model});
        vkg_output(g, "y", vkg_block_build(g, in, &cfg, &w, "block", NULL));
        block_inputs bi = {in, x, sizeof x / sizeof x[0]};
        if (vkg_graph_status(g) != VKG_OK) cli_fail(CMD, "%s", vkg_graph_error(g));
        else rc = compare_graph(g, test, ref, set_block, &bi, "the lesson block (d_model 64, 4 heads) on [2, 10, 64]", quiet);
    }
    vkg_graph_free(g);
    vkg_block_weights_free(&w);
    return rc;
}

int cmd_compare(int argc, char **argv) {
    gpt2_cli c = {.cmd = CMD};
    const char *example = NULL, *against = "cpu";
    int quiet = 0, decode = 0;
    long batch = 0;
    for (int i = 1; i < argc; i++) {
        int taken = gpt2_cli_option(&c, argc, argv, &i);
        if (taken < 0) return 1;
        if (taken) continue;
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--example")) {
            if (!(example = cli_value(CMD, argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--against")) {
            if (!(against = cli_value(CMD, argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--decode")) {
            decode = 1;
        } else if (!strcmp(a, "--batch")) {
            const char *v = cli_value(CMD, argc, argv, &i);
            if (!v || cli_int(CMD, "--batch", v, 2, VKG_BATCH_MAX_SEQ, &batch)) return 1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else {
            return cli_unknown_option(CMD, a, usage);
        }
    }
    if (example && strcmp(example, "block") != 0) return cli_fail(CMD, "unknown example '%s' (known: block)", example);
    if (!example == !c.model_dir) return cli_fail(CMD, "say what to compare: -m DIR with a prompt, or --example block");
    if (example && (c.prompt || c.file || c.ids_text))
        return cli_fail(CMD, "--example block takes no prompt (-p, -f, --ids are for -m DIR)");
    if (example && decode) return cli_fail(CMD, "--decode is for -m DIR: the lesson block has no KV cache");
    if (batch && !decode)
        return cli_fail(CMD, "--batch %ld needs --decode: it batches the sequences of one decode step", batch);
    int rc = 0;
    vkg_device *ref = NULL;
    c.more_devices = 1;
    if (!c.device) c.device = "vulkan"; /* the device under test, a software one too */
    if (c.model_dir) rc = gpt2_cli_load(&c, 0);
    else rc = cli_open_device(CMD, c.device, (int)c.threads, &c.dev);
    if (rc == 0) rc = cli_open_device(CMD, against, (int)c.threads, &ref);
    if (rc == 0 && !vkg_device_is_cpu(ref)) rc = cli_check_threads(CMD, c.threads, c.dev); /* on neither side */
    if (rc == 0 && vkg_device_is_cpu(c.dev) && vkg_device_is_cpu(ref))
        fprintf(stderr, "vkgraph %s: note: both sides run on the CPU executor\n", CMD);
    const int rows = decode ? (batch ? (int)batch : 1) : 0;
    if (rc == 0) rc = example ? compare_block(c.dev, ref, quiet) : compare_model(&c, ref, rows, quiet);
    cli_close_device(CMD, ref);
    gpt2_cli_free(&c);
    return rc;
}
