/* `vkgraph generate`: GPT-2 text generation with a KV cache, streamed as it is produced. */
#include "cli.h"
#include "commands.h"
#include "gpt2_cli.h"
#include "models/sampling.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMD "generate"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph generate -m DIR (-p TEXT | -f FILE | --ids IDS) [-n N] [--temperature T]\n"
            "                        [--top-k K] [--top-p P] [--seed S] [--device D]\n"
            "\n"
            "Continues the prompt with GPT-2, printing each token as it is produced, until N tokens or the\n"
            "end-of-text token (eos_token_id).  Timings (prompt and generated tokens per second) go to standard\n"
            "error.  Without sampling options the choice is greedy (always the most likely token).  An empty\n"
            "prompt starts from the start token (bos_token_id; for GPT-2 the end-of-text token), as GPT-2's\n"
            "unconditional samples do.\n"
            "\n");
    gpt2_cli_usage_common(f);
    fprintf(f,
            "  -n, --tokens N      tokens to generate (default 50)\n"
            "  --temperature T     sample from softmax(logits / T); 0 = greedy (default 1 when --top-k\n"
            "                      or --top-p is given, else 0)\n"
            "  --top-k K           sample among the K most likely tokens only (0 = all)\n"
            "  --top-p P           sample among the most likely tokens whose probabilities add up to P\n"
            "  --seed S            the sampling seed: the same seed gives the same text (default: from the\n"
            "                      clock, printed so the run can be repeated)\n"
            "  --ids-out           print the generated token ids instead of text\n"
            "  --no-prompt         do not print the prompt before the continuation\n"
            "  -h, --help          show this help\n");
}

typedef struct gen_options {
    long n;
    vkg_sampling_options sampling;
    int sampling_given, temperature_given, seed_given, ids_out, no_prompt;
} gen_options;

/* Parses this command's own options; 1 taken, 0 not ours, -1 error (printed). */
static int own_option(gen_options *g, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    double d;
    long v;
    if (strcmp(a, "--ids-out") == 0) return g->ids_out = 1;
    if (strcmp(a, "--no-prompt") == 0) return g->no_prompt = 1;
    int known = strcmp(a, "-n") == 0 || strcmp(a, "--tokens") == 0 || strcmp(a, "--temperature") == 0 ||
                strcmp(a, "--top-k") == 0 || strcmp(a, "--top-p") == 0 || strcmp(a, "--seed") == 0;
    if (!known) return 0;
    const char *val = cli_value(CMD, argc, argv, i);
    if (!val) return -1;
    if (strcmp(a, "-n") == 0 || strcmp(a, "--tokens") == 0) {
        if (cli_int(CMD, a, val, 0, INT_MAX, &g->n)) return -1;
    } else if (strcmp(a, "--temperature") == 0) {
        if (cli_float(CMD, a, val, &d)) return -1;
        if (!(d >= 0 && d < 1e6)) return cli_fail(CMD, "--temperature %s: use 0 (greedy) or a positive number", val), -1;
        g->sampling.temperature = (float)d;
        g->temperature_given = g->sampling_given = 1;
    } else if (strcmp(a, "--top-k") == 0) {
        if (cli_int(CMD, a, val, 0, INT_MAX, &v)) return -1;
        g->sampling.top_k = (int)v;
        g->sampling_given = 1;
    } else if (strcmp(a, "--top-p") == 0) {
        if (cli_float(CMD, a, val, &d)) return -1;
        if (!(d > 0 && d <= 1)) return cli_fail(CMD, "--top-p %s: use a number in (0, 1]", val), -1;
        g->sampling.top_p = (float)d;
        g->sampling_given = 1;
    } else {
        if (cli_int(CMD, a, val, 0, LONG_MAX, &v)) return -1;
        g->sampling.seed = (uint64_t)v;
        g->seed_given = 1;
    }
    return 1;
}

/* Writes one token (text bytes, or its id) and flushes, so it shows at once. */
static int emit(const gpt2_cli *c, const gen_options *g, int32_t id) {
    char buf[32];
    size_t len;
    const char *bytes;
    if (g->ids_out || !c->tok) {
        len = (size_t)snprintf(buf, sizeof buf, "%d ", (int)id);
        bytes = buf;
    } else {
        bytes = gpt2_cli_token(c, id, buf, sizeof buf, &len);
    }
    if (fwrite(bytes, 1, len, stdout) != len || fflush(stdout) != 0)
        return cli_fail(CMD, "cannot write the output: %s", strerror(errno));
    return 0;
}

/* Opens the profile's span for token k (k = 0: ends the last one). */
static int mark_token(vkg_device *dev, long k) {
    char name[32];
    snprintf(name, sizeof name, "token %ld", k);
    vkg_error err = {0};
    if (vkg_device_profile_mark(dev, k ? name : NULL, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    return 0;
}

static int run(gpt2_cli *c, gen_options *g) {
    const vkg_gpt2_config *cfg = &c->model->config;
    vkg_error err = {0};
    vkg_sampler sampler;
    if (vkg_sampler_init(&sampler, &g->sampling, cfg->vocab_size, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    if (!vkg_sampler_is_greedy(&sampler))
        fprintf(stderr, "vkgraph %s: sampling with temperature %g, top-k %d, top-p %g, seed %llu\n", CMD,
                (double)g->sampling.temperature, g->sampling.top_k, (double)g->sampling.top_p,
                (unsigned long long)g->sampling.seed);

    /* The cache holds the prompt and what follows, up to the model's context. */
    long want = (long)c->n_ids + g->n;
    int cache_len = want < cfg->n_positions ? (int)want : cfg->n_positions;
    int rc = 0;
    vkg_gpt2_generator gen;
    double t0 = gpt2_cli_now();
    if (vkg_gpt2_generator_new(c->model, c->dev, cache_len, &gen, &err) != VKG_OK) {
        vkg_sampler_free(&sampler);
        return cli_fail(CMD, "%s", err.message);
    }
    double t1 = gpt2_cli_now();
    if (!g->no_prompt)
        for (size_t i = 0; i < c->n_ids && rc == 0; i++)
            if ((c->ids[i] != cfg->eos_token_id && c->ids[i] != cfg->bos_token_id) || g->ids_out)
                rc = emit(c, g, c->ids[i]); /* markers are not text; ids are never VKG_GPT2_NO_TOKEN */
    /* With --profile, one span per generated token: mark_token opens token k's span before the pass
     * that computes its logits; the next mark ends it. */
    if (rc == 0) rc = mark_token(c->dev, 1);
    if (rc == 0 && vkg_gpt2_generator_feed(&gen, c->ids, (int)c->n_ids, &err) != VKG_OK) rc = cli_fail(CMD, "%s", err.message);
    double t2 = gpt2_cli_now();
    long produced = 0;
    const char *stop = "the requested number of tokens";
    while (rc == 0 && produced < g->n) {
        int32_t next = vkg_sampler_next(&sampler, gen.logits);
        if (cfg->eos_token_id != VKG_GPT2_NO_TOKEN && next == cfg->eos_token_id) {
            stop = "the end-of-text token";
            break;
        }
        rc = emit(c, g, next);
        produced++;
        if (rc || produced == g->n) break;
        if (gen.length >= cache_len) {
            stop = "the end of the model's context";
            break;
        }
        if ((rc = mark_token(c->dev, produced + 1)) == 0 && vkg_gpt2_generator_feed(&gen, &next, 1, &err) != VKG_OK)
            rc = cli_fail(CMD, "%s", err.message);
    }
    if (rc == 0) rc = mark_token(c->dev, 0);
    double t3 = gpt2_cli_now();
    if (rc == 0) {
        printf("\n");
        fflush(stdout);
        fprintf(stderr, "vkgraph %s: stopped at %s\n", CMD, stop);
        fprintf(stderr, "vkgraph %s: %s; plan compiled and weights loaded in %.2f s\n", CMD, vkg_device_name(c->dev),
                t1 - t0);
        fprintf(stderr, "vkgraph %s: prompt: %zu tokens in %.3f s (%.1f tokens/s)\n", CMD, c->n_ids, t2 - t1,
                (double)c->n_ids / (t2 - t1));
        /* The first token comes from the prompt's logits; each later one costs one decode step. */
        long steps = produced > 1 ? produced - 1 : 0;
        if (steps)
            fprintf(stderr, "vkgraph %s: generated: %ld tokens in %.3f s (%.1f tokens/s)\n", CMD, produced, t3 - t2,
                    (double)steps / (t3 - t2));
        else
            fprintf(stderr, "vkgraph %s: generated: %ld tokens\n", CMD, produced);
    }
    vkg_gpt2_generator_free(&gen);
    vkg_sampler_free(&sampler);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    gpt2_cli c = {.cmd = CMD};
    gen_options g = {.n = 50};
    vkg_sampling_options_default(&g.sampling);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        int taken = gpt2_cli_option(&c, argc, argv, &i);
        if (taken == 0) taken = own_option(&g, argc, argv, &i);
        if (taken < 0) return 1;
        if (taken == 0) return cli_unknown_option(CMD, argv[i], usage);
    }
    if (!g.sampling_given) g.sampling.temperature = 0.0f; /* greedy unless sampling was asked for */
    if (g.sampling_given && !g.seed_given) g.sampling.seed = (uint64_t)time(NULL);
    int rc = gpt2_cli_load(&c, 1);
    if (rc == 0) rc = gpt2_cli_open_device(&c);
    if (rc == 0) rc = run(&c, &g);
    gpt2_cli_free(&c);
    return rc;
}
