/* `vkgraph logits`: one GPT-2 forward pass; the logits as a NumPy .npy file. */
#include "cli.h"
#include "commands.h"
#include "gpt2_cli.h"
#include "vkgraph_npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "logits"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph logits -m DIR (-p TEXT | -f FILE | --ids IDS) -o OUT.npy [--all] [--device D]\n"
            "\n"
            "Runs the model over the prompt and writes the logits that predict the token after it, [V] float32\n"
            "(--all: the prediction after every position, [T, V]), as a NumPy .npy file; prints the most\n"
            "likely next token.\n"
            "\n");
    gpt2_cli_usage_common(f);
    fprintf(f,
            "  -o, --output FILE   the .npy file to write\n"
            "  --all               logits for every position, [T, V]\n"
            "  -h, --help          show this help\n");
}

int cmd_logits(int argc, char **argv) {
    gpt2_cli c = {.cmd = CMD};
    const char *out_path = NULL;
    int all = 0;
    for (int i = 1; i < argc; i++) {
        int taken = gpt2_cli_option(&c, argc, argv, &i);
        if (taken < 0) return 1;
        if (taken) continue;
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (out_path) return cli_fail(CMD, "%s given twice", a);
            if (!(out_path = cli_value(CMD, argc, argv, &i))) return 1;
        } else if (strcmp(a, "--all") == 0) {
            all = 1;
        } else {
            return cli_unknown_option(CMD, a, usage);
        }
    }
    if (!out_path) return cli_fail(CMD, "say where to write the logits: -o OUT.npy");
    if (cli_check_extension(CMD, "-o", out_path, ".npy", "a NumPy .npy file")) return 1;
    if (cli_check_output(CMD, "-o", out_path)) return 1; /* before the model loads */
    int rc = gpt2_cli_load(&c, 0);
    const int T = (int)c.n_ids;
    const int V = rc == 0 ? c.info.n_vocab : 0;
    const size_t floats = (size_t)(all ? T : 1) * (size_t)V;
    float *logits = NULL;
    if (rc == 0 && !(logits = malloc(floats * sizeof *logits))) rc = cli_fail(CMD, "out of memory");
    vkg_error err = {0};
    vkg_context *ctx = NULL;
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.n_ctx = co.n_batch = T; /* one pass over the prompt, from position 0 */
    co.logits = all ? VKG_LOGITS_ALL : VKG_LOGITS_LAST;
    double t0 = vkg_clock_seconds();
    if (rc == 0 && (vkg_context_new(c.model, &co, &ctx, &err) != VKG_OK || vkg_context_prefill(ctx, c.ids, T, &err) != VKG_OK ||
                    vkg_context_get_logits(ctx, logits, floats, &err) != VKG_OK))
        rc = cli_fail(CMD, "%s", err.message);
    vkg_context_free(ctx);
    double t1 = vkg_clock_seconds();
    if (rc == 0) {
        int64_t shape[2] = {T, V};
        vkg_status st = all ? vkg_npy_write_f32(out_path, logits, 2, shape, &err)
                            : vkg_npy_write_f32(out_path, logits, 1, &shape[1], &err);
        if (st != VKG_OK) rc = cli_fail(CMD, "%s", err.message);
    }
    if (rc == 0) {
        const float *last = logits + (all ? (size_t)(T - 1) * (size_t)V : 0);
        int32_t best = vkg_argmax(last, V);
        char buf[32], shown[256];
        size_t len;
        const char *tok = gpt2_cli_token(&c, best, buf, sizeof buf, &len);
        gpt2_cli_repr(tok, len, shown, sizeof shown);
        if (all) printf("wrote %s: [%d, %d] float32\n", out_path, T, V);
        else printf("wrote %s: [%d] float32\n", out_path, V);
        printf("most likely next token: %d %s (logit %.4f)\n", (int)best, shown, (double)last[best]);
        fprintf(stderr, "vkgraph %s: %d tokens on %s in %.3f s\n", CMD, T, vkg_device_name(c.dev), t1 - t0);
    }
    free(logits);
    gpt2_cli_free(&c);
    return rc;
}
