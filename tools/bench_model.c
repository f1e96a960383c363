/* `vkgraph bench -m DIR | --random NAME`: a GPT-2 model's forward passes and decoding, timed as a
 * user of the library runs them (vkg_gpt2_runner_run, then reading the logits), with the machine
 * measured in the same run.  The order keeps each figure clean: the random model is written and
 * the peak-memory count restarted before the model is loaded, and the machine's buffers come
 * after the model's peak memory has been read. */
#include "bench.h"
#include "cli.h"
#include "core/backend.h"
#include "core/error.h"
#include "io/npy.h"
#include "models/gpt2_random.h"
#include "models/sampling.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CMD "bench"
#define MIN_RUNS 3
#define RUN_BUDGET_MS 20000.0    /* after MIN_RUNS timed runs, no more once they took this long */

/* Weight storage that --dtype may ask for.  f16 arrives with 16-bit weights (a load option):
 * enabling it is its `supported` here and passing the option in load_model. */
static const struct { const char *name; int supported; } dtypes[] = {{"f32", 1}, {"f16", 0}};

static int check_dtype(const char *dtype) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dtype, dtypes[i].name))
            return dtypes[i].supported ? 0
                                       : cli_fail(CMD, "--dtype %s: unsupported: vkgraph does not yet store weights "
                                                  "in %s; use --dtype f32", dtype, dtype);
    return cli_fail(CMD, "--dtype: '%s'; use f32 or f16", dtype);
}

static void remove_random(const char *dir) {
    static const char *const files[] = {"config.json", "model.safetensors"};
    char file[PATH_MAX + 32];
    for (int i = 0; i < 2; i++) {
        snprintf(file, sizeof file, "%s/%s", dir, files[i]);
        unlink(file);
    }
    rmdir(dir);
}

static int load_model(const char *dir, const char *dtype, vkg_gpt2 **m) {
    (void)dtype; /* f32: the weights as the file stores them, widened once where they are not f32 */
    vkg_error err = {0};
    if (vkg_gpt2_load(dir, m, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    return 0;
}

/* --random NAME: the model is written to a temporary folder (dir, PATH_MAX bytes), loaded from it
 * (memory mapped) and the folder removed at once (remove_random): the mapping keeps the weights,
 * and nothing is left behind. */
static int write_random(const char *size, char *dir) {
    vkg_gpt2_random_options ro;
    vkg_gpt2_random_options_default(&ro);
    vkg_error err = {0};
    if (vkg_gpt2_random_size(size, &ro, &err) != VKG_OK) return cli_fail(CMD, "--random: %s", err.message);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, PATH_MAX, "%s/vkgraph-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return cli_fail(CMD, "cannot make a temporary folder %s for the random model", dir);
    if (vkg_gpt2_write_random(dir, &ro, &err) == VKG_OK) return 0;
    remove_random(dir);
    return cli_fail(CMD, "--random %s: %s", size, err.message);
}

/* Matmul steps' time in the run just profiled: the events added since `from`. */
static double matmul_ms_since(const vkg_device *d, const vkg_plan *p, size_t from) {
    const vkg_profile *prof = &d->profile;
    double ns = 0;
    int steps = 0;
    for (size_t i = from; i < prof->n; i++) {
        const vkg_profile_event *e = &prof->events[i];
        if (e->session == 0 || e->step < 0 || e->step >= p->n_steps) continue;
        steps++;
        if (p->steps[e->step].kernel == VKG_KERNEL_MATMUL) ns += (double)(e->end_ns - e->begin_ns);
    }
    return steps == p->n_steps && ns > 0 ? ns / 1e6 : NAN;
}

static int write_npy(const char *dir, const char *name, const float *x, int64_t rows, int64_t cols) {
    char path[PATH_MAX];
    vkg_error err = {0};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const int64_t shape[2] = {rows, cols};
    return vkg_npy_write_f32(path, x, 2, shape, &err) == VKG_OK ? 0 : cli_fail(CMD, "--logits: %s", err.message);
}

/* One forward pass: run, then read every position's logits (the error path names the T). */
static vkg_status forward_once(vkg_gpt2_runner *r, const int32_t *ids, float *logits, size_t floats,
                               vkg_error *err) {
    vkg_status st = vkg_gpt2_runner_run(r, ids, 0, err);
    return st == VKG_OK ? vkg_gpt2_runner_logits(r, logits, floats, err) : st;
}

static int bench_forward_at(const bench_options *o, const vkg_gpt2 *m, vkg_device *d, const int32_t *ids, int T,
                            bench_forward *f) {
    memset(f, 0, sizeof *f);
    f->tokens = T;
    f->matmul_ms = NAN;
    vkg_gpt2_build_options bo;
    vkg_gpt2_build_options_default(&bo, T);
    bo.all_logits = 1;
    vkg_gpt2_runner r;
    vkg_error err = {0};
    double t0 = bench_now_ms();
    if (vkg_gpt2_runner_new(m, d, &bo, &r, &err) != VKG_OK) return cli_fail(CMD, "forward at T = %d: %s", T, err.message);
    f->compile_ms = bench_now_ms() - t0;
    const size_t floats = (size_t)T * (size_t)m->config.vocab_size;
    float *logits = malloc(floats * sizeof *logits);
    double *ms = calloc((size_t)o->repeat, sizeof *ms);
    vkg_status st = logits && ms ? VKG_OK : vkg_error_set(&err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the logits");
    if (st == VKG_OK) st = forward_once(&r, ids, logits, floats, &err); /* the warm-up */
    double spent = 0;
    for (int i = 0; st == VKG_OK && i < o->repeat && !(i >= MIN_RUNS && spent > RUN_BUDGET_MS); i++) {
        t0 = bench_now_ms();
        st = forward_once(&r, ids, logits, floats, &err);
        ms[i] = bench_now_ms() - t0;
        spent += ms[i];
        f->runs = i + 1;
    }
    if (st == VKG_OK) {
        f->median_ms = bench_median(ms, f->runs);
        f->min_ms = ms[0];
        f->matmul_gflop = bench_plan_flops(r.plan) / 1e9;
        vkg_plan_memory(r.plan, &f->memory);
        /* One more run, profiled, for the matmul steps' share of it. */
        const size_t from = d->profile.n;
        st = vkg_session_enable_profiling(r.session, 1, &err);
        if (st == VKG_OK) st = forward_once(&r, ids, logits, floats, &err);
        if (st == VKG_OK && !d->opts.profile) st = vkg_session_enable_profiling(r.session, 0, &err);
        if (st == VKG_OK) f->matmul_ms = matmul_ms_since(d, r.plan, from);
    }
    int rc = st == VKG_OK ? 0 : cli_fail(CMD, "forward at T = %d: %s", T, err.message);
    if (!rc && o->logits_dir) {
        char name[64];
        snprintf(name, sizeof name, "forward-%d.npy", T);
        rc = write_npy(o->logits_dir, name, logits, T, m->config.vocab_size);
    }
    free(ms);
    free(logits);
    vkg_gpt2_runner_free(&r);
    return rc;
}

/* The prompt, then dec->steps tokens, each step timed (run, logits, argmax).  The cache starts
 * empty.  rows, when non-NULL, receives the steps + 1 predictions. */
static vkg_status decode_pass(vkg_gpt2_runner *prefill, vkg_gpt2_runner *step, const int32_t *prompt, int steps,
                              bench_decode *dec, double *token_ms, float *rows, float *logits, vkg_error *err) {
    const int V = step->model->config.vocab_size, P = dec->prompt;
    vkg_status st = vkg_session_reset_state(step->session, err);
    double t0 = bench_now_ms();
    if (st == VKG_OK) st = vkg_gpt2_runner_run(prefill, prompt, 0, err);
    if (st == VKG_OK) st = vkg_gpt2_runner_logits(prefill, logits, (size_t)V, err);
    if (st == VKG_OK) dec->ids[0] = vkg_argmax(logits, V);
    dec->prefill_ms = bench_now_ms() - t0;
    if (st == VKG_OK && rows) memcpy(rows, logits, (size_t)V * sizeof *logits);
    for (int k = 0; st == VKG_OK && k < steps; k++) {
        t0 = bench_now_ms();
        st = vkg_gpt2_runner_run(step, &dec->ids[k], P + k, err);
        if (st == VKG_OK) st = vkg_gpt2_runner_logits(step, logits, (size_t)V, err);
        if (st == VKG_OK) dec->ids[k + 1] = vkg_argmax(logits, V);
        token_ms[k] = bench_now_ms() - t0;
        if (st == VKG_OK && rows) memcpy(rows + (size_t)(k + 1) * (size_t)V, logits, (size_t)V * sizeof *logits);
    }
    return st;
}

static int bench_decode_run(const bench_options *o, const vkg_gpt2 *m, vkg_device *d, const int32_t *prompt,
                            int P, bench_decode *dec) {
    const int N = o->decode, S = P + N, V = m->config.vocab_size;
    dec->prompt = P;
    dec->steps = N;
    if (S > m->config.n_positions)
        return cli_fail(CMD, "decode: a prompt of %d tokens (the smallest -T) and --decode %d make %d positions; the "
                        "model holds %d (n_positions)", P, N, S, m->config.n_positions);
    vkg_gpt2_build_options bo;
    vkg_gpt2_build_options_default(&bo, 1);
    bo.cache_len = S;
    vkg_gpt2_runner step, prefill;
    memset(&prefill, 0, sizeof prefill);
    vkg_error err = {0};
    double t0 = bench_now_ms();
    vkg_status st = vkg_gpt2_runner_new(m, d, &bo, &step, &err);
    if (st != VKG_OK) return cli_fail(CMD, "decode: %s", err.message);
    bo.tokens = P;
    st = vkg_gpt2_runner_new_shared(m, d, &bo, step.session, &prefill, &err);
    dec->compile_ms = bench_now_ms() - t0;
    dec->ids = calloc((size_t)N + 1, sizeof *dec->ids);
    double *token_ms = calloc((size_t)N + 1, sizeof *token_ms);
    float *logits = malloc((size_t)V * sizeof *logits);
    float *rows = o->logits_dir ? malloc((size_t)(N + 1) * (size_t)V * sizeof *rows) : NULL;
    if (st == VKG_OK && (!dec->ids || !token_ms || !logits || (o->logits_dir && !rows)))
        st = vkg_error_set(&err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    /* A warm-up pass of a few steps, then the timed one. */
    if (st == VKG_OK) st = decode_pass(&prefill, &step, prompt, N < 2 ? N : 2, dec, token_ms, NULL, logits, &err);
    if (st == VKG_OK) st = decode_pass(&prefill, &step, prompt, N, dec, token_ms, rows, logits, &err);
    if (st == VKG_OK) {
        for (int k = 0; k < N; k++) dec->total_ms += token_ms[k];
        dec->median_token_ms = bench_median(token_ms, N);
        vkg_plan_memory(step.plan, &dec->memory);
        dec->weight_bytes = dec->memory.constant_bytes;
    }
    int rc = st == VKG_OK ? 0 : cli_fail(CMD, "decode: %s", err.message);
    if (!rc && rows) rc = write_npy(o->logits_dir, "decode.npy", rows, N + 1, V);
    free(rows);
    free(logits);
    free(token_ms);
    vkg_gpt2_runner_free(&prefill);
    vkg_gpt2_runner_free(&step);
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
    if (check_dtype(o->dtype)) return 1;
    bench_model_result r;
    memset(&r, 0, sizeof r);
    const double load_average = bench_load_average();
    r.dtype = o->dtype;
    r.name = o->random_size ? o->random_size : o->model_dir;
    vkg_gpt2 *m = NULL;
    char random_dir[PATH_MAX];
    const char *dir = o->model_dir;
    if (o->random_size) {
        if (write_random(o->random_size, random_dir)) return 1;
        dir = random_dir;
    }
    /* The peak from here on: writing the random model is not part of it. */
    r.peak_host_includes_setup = o->random_size && !bench_reset_peak_rss();
    double t0 = bench_now_ms();
    const int failed = load_model(dir, o->dtype, &m);
    r.load_ms = bench_now_ms() - t0;
    r.random_weights = o->random_size || vkg_gpt2_dir_is_random(dir);
    if (o->random_size) remove_random(random_dir);
    if (failed) return 1;
    r.model = m;

    int longest = 0, shortest = INT_MAX, rc = 0;
    for (int i = 0; i < o->n_tokens; i++) {
        if (o->tokens[i] > longest) longest = o->tokens[i];
        if (o->tokens[i] < shortest) shortest = o->tokens[i];
    }
    if (longest > m->config.n_positions)
        rc = cli_fail(CMD, "-T %d: the model holds %d positions (n_positions)", longest, m->config.n_positions);
    vkg_device *d = NULL;
    if (!rc && cli_open_device(CMD, o->device, (int)o->threads, &d)) rc = 1;
    if (!rc) {
        snprintf(r.device, sizeof r.device, "%s", vkg_device_name(d));
        r.cpu = vkg_device_is_cpu(d);
        r.prompt_len = longest;
        if (!(r.prompt = make_prompt(longest, m->config.vocab_size))) rc = cli_fail(CMD, "out of memory");
    }
    for (int i = 0; !rc && i < o->n_tokens; i++, r.n_forward++)
        rc = bench_forward_at(o, m, d, r.prompt, o->tokens[i], &r.forward[i]);
    if (!rc && o->decode > 0) rc = bench_decode_run(o, m, d, r.prompt, shortest, &r.decode);
    if (!rc) {
        r.peak_host_bytes = bench_peak_rss_bytes();
        r.peak_device_bytes = d->device_memory.peak_bytes;
        if (bench_machine_measure((int)o->threads, &r.machine))
            rc = cli_fail(CMD, "out of memory for the read bandwidth's %llu MB buffer",
                          (unsigned long long)(r.machine.read_bytes >> 20));
        r.machine.load_average = load_average;
    }
    if (!rc && o->json) bench_report_json(o, &r);
    else if (!rc) bench_report_text(o, &r);
    cli_close_device(CMD, d);
    free(r.decode.ids);
    free(r.prompt);
    vkg_gpt2_free(m);
    return rc;
}
