/* `vkgraph bench -m DIR | --random NAME`: a model's forward passes and decoding, timed as a
 * user of the library runs them (vkg_context_prefill, then reading the logits), with the machine
 * measured in the same run.  The order keeps each figure clean: the random model is written and
 * the peak-memory count restarted before the model is loaded, and the machine's buffers come
 * after the model's peak memory has been read. */
#include "bench.h"
#include "cli.h"
#include "vkgraph_model.h"
#include "vkgraph_npy.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CMD "bench"
#define MIN_RUNS 3
#define RUN_BUDGET_MS 20000.0    /* after MIN_RUNS timed runs, no more once they took this long */

static void remove_random(const char *dir) {
    static const char *const files[] = {"config.json", "model.safetensors"};
    char file[PATH_MAX + 32];
    for (int i = 0; i < 2; i++) {
        snprintf(file, sizeof file, "%s/%s", dir, files[i]);
        unlink(file);
    }
    rmdir(dir);
}

/* The weight matrices in the dtype --dtype names, else as the file stores them (as every command
 * opens a model; the report names the dtype used). */
static int load_model(const char *dir, vkg_weight_dtype dtype, vkg_device *d, vkg_model **m) {
    vkg_model_options mo;
    vkg_model_options_default(&mo);
    mo.dtype = dtype;
    mo.no_tokenizer = 1; /* ids only */
    vkg_error err = {0};
    if (vkg_model_open(dir, d, &mo, m, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    return 0;
}

/* --random NAME: the model is written to a temporary folder (dir, PATH_MAX bytes), loaded from it
 * and the folder removed at once (remove_random): the loader has read the weights, and nothing
 * is left behind.  NAME is a GPT-2 size or a Llama-family shape (vkgraph random's). */
static int write_random(const char *size, char *dir) {
    vkg_random_gpt2_options go;
    vkg_random_gpt2_options_default(&go);
    const int gpt2 = vkg_random_gpt2_size(size, &go, NULL) == VKG_OK;
    vkg_random_model_options lo;
    vkg_random_model_options_default(&lo);
    lo.shape = size;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, PATH_MAX, "%s/vkgraph-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return cli_fail(CMD, "cannot make a temporary folder %s for the random model", dir);
    vkg_error err = {0};
    if ((gpt2 ? vkg_random_gpt2_write(dir, &go, &err) : vkg_random_model_write(dir, &lo, &err)) == VKG_OK) return 0;
    remove_random(dir);
    if (!gpt2 && err.status == VKG_ERR_NOT_FOUND)
        return cli_fail(CMD, "--random %s: not a shape vkgraph knows (GPT-2: %s; Llama family: %s)", size,
                        vkg_random_gpt2_size_names(), vkg_random_model_shapes());
    return cli_fail(CMD, "--random %s: %s", size, err.message);
}

static int write_npy(const char *dir, const char *name, const float *x, int64_t rows, int64_t cols) {
    char path[PATH_MAX];
    vkg_error err = {0};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const int64_t shape[2] = {rows, cols};
    return vkg_npy_write_f32(path, x, 2, shape, &err) == VKG_OK ? 0 : cli_fail(CMD, "--logits: %s", err.message);
}

/* One forward pass: the T tokens from position 0, then every position's logits.  Emptying the
 * cache first is not timed (start_ms is read after it). */
static vkg_status forward_once(vkg_context *ctx, const int32_t *ids, int T, float *logits, size_t floats,
                               double *ms, vkg_error *err) {
    vkg_status st = vkg_context_reset(ctx, err);
    const double t0 = bench_now_ms();
    if (st == VKG_OK) st = vkg_context_prefill(ctx, ids, T, err);
    if (st == VKG_OK) st = vkg_context_get_logits(ctx, logits, floats, err);
    if (ms) *ms = bench_now_ms() - t0;
    return st;
}

static vkg_status out_of_memory(vkg_error *err, const char *what) {
    snprintf(err->message, sizeof err->message, "out of memory for %s", what);
    err->status = VKG_ERR_OUT_OF_MEMORY;
    return VKG_ERR_OUT_OF_MEMORY;
}

static int bench_forward_at(const bench_options *o, vkg_model *m, const vkg_model_info *info, const int32_t *ids,
                            int T, bench_forward *f) {
    memset(f, 0, sizeof *f);
    f->tokens = T;
    f->matmul_ms = NAN;
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.logits = VKG_LOGITS_ALL;
    co.n_ctx = co.n_batch = T; /* one pass over the prompt: its plan is the context's first */
    vkg_context *ctx = NULL;
    vkg_error err = {0};
    double t0 = bench_now_ms();
    if (vkg_context_new(m, &co, &ctx, &err) != VKG_OK) return cli_fail(CMD, "forward at T = %d: %s", T, err.message);
    f->compile_ms = bench_now_ms() - t0;
    const size_t floats = (size_t)T * (size_t)info->n_vocab;
    float *logits = malloc(floats * sizeof *logits);
    double *ms = calloc((size_t)o->repeat, sizeof *ms);
    vkg_status st = logits && ms ? VKG_OK : out_of_memory(&err, "the logits");
    if (st == VKG_OK) st = forward_once(ctx, ids, T, logits, floats, NULL, &err); /* the warm-up */
    double spent = 0;
    for (int i = 0; st == VKG_OK && i < o->repeat && !(i >= MIN_RUNS && spent > RUN_BUDGET_MS); i++) {
        st = forward_once(ctx, ids, T, logits, floats, &ms[i], &err);
        spent += ms[i];
        f->runs = i + 1;
    }
    const vkg_plan *plan = vkg_context_plan(ctx, T);
    if (st == VKG_OK && plan) {
        f->median_ms = bench_median(ms, f->runs);
        f->min_ms = ms[0];
        f->matmul_gflop = vkg_plan_matmul_flops(plan) / 1e9;
        vkg_plan_memory(plan, &f->memory);
        /* One more run, profiled, for the matmul steps' share of it (a run recorded whole only). */
        vkg_device *d = vkg_model_device(m);
        const size_t from = vkg_device_profile_event_count(d);
        st = vkg_context_enable_profiling(ctx, 1, &err);
        if (st == VKG_OK) st = forward_once(ctx, ids, T, logits, floats, NULL, &err);
        if (st == VKG_OK) st = vkg_context_enable_profiling(ctx, 0, &err); /* freed next: for tidiness */
        int steps = 0;
        const double s = vkg_device_profile_kernel_seconds(d, from, "matmul", &steps);
        if (st == VKG_OK && steps == vkg_plan_step_count(plan) && s > 0) f->matmul_ms = s * 1e3;
    }
    int rc = st == VKG_OK ? 0 : cli_fail(CMD, "forward at T = %d: %s", T, err.message);
    if (!rc && o->logits_dir) {
        char name[64];
        snprintf(name, sizeof name, "forward-%d.npy", T);
        rc = write_npy(o->logits_dir, name, logits, T, info->n_vocab);
    }
    free(ms);
    free(logits);
    vkg_context_free(ctx);
    return rc;
}

/* The prompt, then dec->steps tokens, each step timed (decode, logits, argmax).  The cache starts
 * empty.  rows, when non-NULL, receives the steps + 1 predictions. */
static vkg_status decode_pass(vkg_context *ctx, int V, const int32_t *prompt, int steps, bench_decode *dec,
                              double *token_ms, float *rows, float *logits, vkg_error *err) {
    const int P = dec->prompt;
    vkg_status st = vkg_context_reset(ctx, err);
    double t0 = bench_now_ms();
    if (st == VKG_OK) st = vkg_context_prefill(ctx, prompt, P, err);
    if (st == VKG_OK) st = vkg_context_get_logits(ctx, logits, (size_t)V, err);
    if (st == VKG_OK) dec->ids[0] = vkg_argmax(logits, V);
    dec->prefill_ms = bench_now_ms() - t0;
    if (st == VKG_OK && rows) memcpy(rows, logits, (size_t)V * sizeof *logits);
    for (int k = 0; st == VKG_OK && k < steps; k++) {
        t0 = bench_now_ms();
        st = vkg_context_decode(ctx, dec->ids[k], err);
        if (st == VKG_OK) st = vkg_context_get_logits(ctx, logits, (size_t)V, err);
        if (st == VKG_OK) dec->ids[k + 1] = vkg_argmax(logits, V);
        token_ms[k] = bench_now_ms() - t0;
        if (st == VKG_OK && rows) memcpy(rows + (size_t)(k + 1) * (size_t)V, logits, (size_t)V * sizeof *logits);
    }
    return st;
}

static int bench_decode_run(const bench_options *o, vkg_model *m, const vkg_model_info *info, const int32_t *prompt,
                            int P, bench_decode *dec) {
    const int N = o->decode, S = P + N, V = info->n_vocab;
    dec->prompt = P;
    dec->steps = N;
    if (S > info->n_ctx)
        return cli_fail(CMD, "decode: a prompt of %d tokens (the smallest -T) and --decode %d make %d positions; the "
                        "model holds %d (n_positions)", P, N, S, info->n_ctx);
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.logits = VKG_LOGITS_LAST;
    co.n_ctx = S;
    co.n_batch = P; /* the prefill's plan; the one-token plan compiles on the first decode */
    vkg_context *ctx = NULL;
    vkg_error err = {0};
    double t0 = bench_now_ms();
    vkg_status st = vkg_context_new(m, &co, &ctx, &err);
    if (st != VKG_OK) return cli_fail(CMD, "decode: %s", err.message);
    dec->compile_ms = bench_now_ms() - t0;
    dec->ids = calloc((size_t)N + 1, sizeof *dec->ids);
    double *token_ms = calloc((size_t)N + 1, sizeof *token_ms);
    float *logits = malloc((size_t)V * sizeof *logits);
    float *rows = o->logits_dir ? malloc((size_t)(N + 1) * (size_t)V * sizeof *rows) : NULL;
    if (st == VKG_OK && (!dec->ids || !token_ms || !logits || (o->logits_dir && !rows)))
        st = out_of_memory(&err, "the logits");
    /* The one-token plan (P > 1): compiled by the first decode, counted with the setup. */
    if (st == VKG_OK && N > 0 && P > 1) {
        t0 = bench_now_ms();
        st = vkg_context_prefill(ctx, prompt, 1, &err);
        dec->compile_ms += bench_now_ms() - t0;
    }
    /* A warm-up pass of a few steps, then the timed one. */
    if (st == VKG_OK) st = decode_pass(ctx, V, prompt, N < 2 ? N : 2, dec, token_ms, NULL, logits, &err);
    if (st == VKG_OK) st = decode_pass(ctx, V, prompt, N, dec, token_ms, rows, logits, &err);
    const vkg_plan *step = vkg_context_plan(ctx, N > 0 ? 1 : P);
    if (st == VKG_OK && step) {
        for (int k = 0; k < N; k++) dec->total_ms += token_ms[k];
        dec->median_token_ms = bench_median(token_ms, N);
        vkg_plan_memory(step, &dec->memory);
        dec->weight_bytes = dec->memory.constant_bytes;
    }
    int rc = st == VKG_OK ? 0 : cli_fail(CMD, "decode: %s", err.message);
    if (!rc && rows) rc = write_npy(o->logits_dir, "decode.npy", rows, N + 1, V);
    free(rows);
    free(logits);
    free(token_ms);
    vkg_context_free(ctx);
    return rc;
}

/* The prompt every run takes a prefix of: the same ids on every machine. */
static int32_t *make_prompt(int n, int vocab) {
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    vkg_rng rng;
    vkg_rng_seed(&rng, 1);
    for (int i = 0; ids && i < n; i++) ids[i] = (int32_t)(vkg_rng_next(&rng) % (uint64_t)vocab);
    return ids;
}

int bench_model(const bench_options *o) {
    bench_model_result r;
    memset(&r, 0, sizeof r);
    const double load_average = bench_load_average();
    r.name = o->random_size ? o->random_size : o->model_dir;
    /* The device first: the model is opened on it (its weights go up with the first context). */
    for (int i = 0; o->logits_dir && i <= o->n_tokens; i++) { /* the files, checked before any work */
        char path[PATH_MAX], name[32];
        if (i < o->n_tokens) snprintf(name, sizeof name, "forward-%d.npy", o->tokens[i]);
        else if (o->decode > 0) snprintf(name, sizeof name, "decode.npy");
        else break;
        snprintf(path, sizeof path, "%s/%s", o->logits_dir, name);
        if (cli_check_output(CMD, "--logits", path)) return 1;
    }
    vkg_device *d = NULL;
    if (cli_open_device(CMD, o->device, (int)o->threads, &d)) return 1;

    vkg_model *m = NULL;
    char random_dir[PATH_MAX];
    const char *dir = o->model_dir;
    if (o->random_size && write_random(o->random_size, random_dir)) {
        cli_close_device(CMD, d);
        return 1;
    }
    if (o->random_size) dir = random_dir;
    /* The peak from here on: writing the random model is not part of it. */
    r.peak_host_includes_setup = o->random_size && !bench_reset_peak_rss();
    double t0 = bench_now_ms();
    int rc = load_model(dir, o->dtype, d, &m);
    r.load_ms = bench_now_ms() - t0;
    if (o->random_size) remove_random(random_dir);
    vkg_error err = {0};
    if (!rc && vkg_model_get_info(m, &r.info, &err) != VKG_OK) rc = cli_fail(CMD, "%s", err.message);
    r.dtype = vkg_weight_dtype_name(rc ? o->dtype : r.info.dtype);
    r.random_weights = o->random_size || r.info.random_weights;

    int longest = 0, shortest = INT_MAX;
    for (int i = 0; i < o->n_tokens; i++) {
        if (o->tokens[i] > longest) longest = o->tokens[i];
        if (o->tokens[i] < shortest) shortest = o->tokens[i];
    }
    if (!rc && longest > r.info.n_ctx)
        rc = cli_fail(CMD, "-T %d: the model holds %d positions (n_positions)", longest, r.info.n_ctx);
    if (!rc) {
        snprintf(r.device, sizeof r.device, "%s", vkg_device_name(d));
        r.cpu = vkg_device_is_cpu(d);
        r.prompt_len = longest;
        if (!(r.prompt = make_prompt(longest, r.info.n_vocab))) rc = cli_fail(CMD, "out of memory");
    }
    for (int i = 0; !rc && i < o->n_tokens; i++, r.n_forward++)
        rc = bench_forward_at(o, m, &r.info, r.prompt, o->tokens[i], &r.forward[i]);
    if (!rc && o->decode > 0) rc = bench_decode_run(o, m, &r.info, r.prompt, shortest, &r.decode);
    if (!rc) {
        r.peak_host_bytes = bench_peak_rss_bytes();
        r.peak_device_bytes = vkg_device_peak_memory_bytes(d);
        if (bench_machine_measure((int)o->threads, &r.machine))
            rc = cli_fail(CMD, "out of memory for the read bandwidth's %llu MB buffer",
                          (unsigned long long)(r.machine.read_bytes >> 20));
        r.machine.load_average = load_average;
    }
    if (!rc && o->json) bench_report_json(o, &r);
    else if (!rc) bench_report_text(o, &r);
    free(r.decode.ids);
    free(r.prompt);
    vkg_model_free(m);
    cli_close_device(CMD, d);
    return rc;
}
