/* `vkgraph random DIR --shape NAME`: a model with random weights and a real model's shapes, written
 * as transformers writes a checkpoint, for running and testing every command offline.  GPT-2's
 * shapes go to gpt2-random, which keeps its own options. */
#include "cli.h"
#include "commands.h"
#include "gpt2_cli.h"
#include "vkgraph_model.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "random"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph random DIR --shape NAME [--arch A] [--layers N] [--ctx P] [--vocab V] [--eos ID]\n"
            "                          [--rope-scaling S] [--dtype f32|f16|bf16] [--shards N] [--tied | --untied]\n"
            "                          [--seed S] [--force]\n"
            "\n"
            "Writes DIR/config.json and the weights (model.safetensors, or N shards\n"
            "model-0000k-of-0000N.safetensors with model.safetensors.index.json) exactly as transformers'\n"
            "save_pretrained lays them out, with a real model's shapes but RANDOM weights: every command\n"
            "runs on it (give prompts as --ids) and its outputs mean nothing.\n"
            "\n"
            "  --shape NAME  %s;\n"
            "                or gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt2-tiny (vkgraph gpt2-random)\n"
            "  --arch A      llama, mistral, qwen2, qwen3 or gpt2: checked against the shape's\n"
            "  --layers N    fewer (or more) layers than the real model\n"
            "  --ctx P       max_position_embeddings (default: the real model's)\n"
            "  --rope-scaling S  rope_scaling (default: the real model's): none, or TYPE:FACTOR[:ORIGINAL]\n"
            "                with TYPE linear, dynamic, llama3 or yarn, ORIGINAL the original context of\n"
            "                llama3 (default 8192) and yarn (default: --ctx); yarn:4:32768 is Qwen2.5's\n"
            "                long-context setting\n"
            "  --vocab V     vocab_size (default: the real model's; a small tokenizer's for tests); a\n"
            "                bos / eos id outside it becomes null\n"
            "  --dtype D     f32 (default), f16 or bf16\n"
            "  --shards N    write N shards and the index (default 1: one model.safetensors)\n"
            "  --tied, --untied  the head shares the embedding's weights, or lm_head.weight is separate\n"
            "                (default: as the real model)\n"
            "  --seed S      the random seed (default 1): the same options give the same files\n"
            "  --eos ID      eos_token_id (default: the real model's, if inside the vocabulary)\n"
            "  --force       overwrite the model in DIR, even one that is not random\n",
            vkg_random_model_shapes());
}

/* GPT-2's shapes: the same options, passed to gpt2-random. */
static int run_gpt2(int argc, char **argv) {
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) return cli_fail(CMD, "out of memory");
    int n = 0;
    args[n++] = "gpt2-random";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--arch") == 0) {
            i++;
            continue;
        }
        if (strcmp(argv[i], "--tied") == 0) continue;
        if (strcmp(argv[i], "--shards") == 0 && i + 1 < argc && strcmp(argv[i + 1], "1") != 0) {
            free(args);
            return cli_fail(CMD, "--shards: GPT-2 checkpoints are written as one model.safetensors");
        }
        if (strcmp(argv[i], "--shards") == 0) {
            i++;
            continue;
        }
        args[n++] = strcmp(argv[i], "--shape") == 0 ? "--size" : argv[i];
    }
    int rc = cmd_gpt2_random(n, args);
    free(args);
    return rc;
}

static int write_marker(const char *dir, const char *shape, uint64_t seed) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, VKG_RANDOM_WEIGHTS_MARKER);
    FILE *f = fopen(path, "w");
    if (!f) return cli_fail(CMD, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "The weights in this folder are RANDOM (vkgraph random --shape %s, seed %llu): the model has the\n"
               "shapes of a real one but has learned nothing.  Its text and attention patterns mean nothing.\n",
            shape, (unsigned long long)seed);
    return fclose(f) == 0 ? 0 : cli_fail(CMD, "cannot write %s", path);
}

/* The options whose values the table does not store as they are. */
static int more_option(void *ctx, const char *opt, const char *val) {
    vkg_random_model_options *o = ctx;
    if (strcmp(opt, "--dtype") == 0) return gpt2_cli_dtype(CMD, val, &o->dtype);
    return -1;
}

int cmd_random(int argc, char **argv) {
    vkg_random_model_options o;
    vkg_random_model_options_default(&o);
    o.shape = NULL;
    const char *dir = NULL;
    int force = 0;
    /* GPT-2's shapes first: gpt2-random takes its own options (--vocab, --heads, ...) */
    for (int i = 1; i + 1 < argc; i++)
        if ((strcmp(argv[i], "--shape") == 0 && strncmp(argv[i + 1], "gpt2", 4) == 0) ||
            (strcmp(argv[i], "--arch") == 0 && strcmp(argv[i + 1], "gpt2") == 0))
            return run_gpt2(argc, argv);
    const cli_option opts[] = {
        CLI_OPT_SWITCH("--force", &force, 1),
        CLI_OPT_SWITCH("--tied", &o.tied, 1),
        CLI_OPT_SWITCH("--untied", &o.tied, 0),
        CLI_OPT_TEXT("--shape", &o.shape),
        CLI_OPT_TEXT("--arch", &o.arch),
        CLI_OPT_TEXT("--rope-scaling", &o.rope_scaling),
        CLI_OPT_INT("--layers", &o.n_layer, 1, 4096),
        CLI_OPT_INT("--ctx", &o.n_positions, 1, 1 << 22),
        CLI_OPT_INT("--vocab", &o.vocab_size, 1, 1 << 24),
        CLI_OPT_INT("--shards", &o.shards, 1, 4096),
        CLI_OPT_INT("--eos", &o.eos_token, 0, (1 << 24) - 1),
        CLI_OPT_SEED("--seed", &o.seed),
        CLI_OPT_FOLDER(&dir),
    };
    const int parsed = cli_options_parse(CMD, opts, sizeof opts / sizeof *opts, more_option, &o, usage, argc, argv);
    if (parsed) return parsed == CLI_HELP_SHOWN ? 0 : 1;
    if (!dir) return cli_fail(CMD, "say where to write the model: vkgraph random DIR --shape NAME");
    if (!o.shape) return cli_fail(CMD, "--shape: say which model's shapes: %s", vkg_random_model_shapes());
    if (random_check_not_a_model(CMD, dir, force)) return 1;
    vkg_error err = {0};
    if (vkg_random_model_write(dir, &o, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    if (write_marker(dir, o.shape, o.seed)) return 1;
    char layers[32] = "";
    if (o.n_layer) snprintf(layers, sizeof layers, " with %d layer%s", o.n_layer, o.n_layer == 1 ? "" : "s");
    printf("wrote a model of %s's shapes%s with RANDOM weights to %s%s; its outputs mean nothing (no tokenizer: "
           "give prompts as --ids)\n", o.shape, layers, dir, o.shards > 1 ? " in shards" : "");
    return 0;
}
