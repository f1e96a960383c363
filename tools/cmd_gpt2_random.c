/* `vkgraph gpt2-random DIR`: a GPT-2-shaped model with random weights and GPT-2's tokenizer, for
 * trying every GPT-2 command where the real weights cannot be downloaded. */
#include "cli.h"
#include "commands.h"
#include "gpt2_cli.h"
#include "vkgraph_model.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CMD "gpt2-random"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph gpt2-random DIR [--size NAME] [--layers N] [--heads H] [--embd C] [--ctx P] [--seed S]\n"
            "                               [--vocab V] [--dtype f32|f16|bf16] [--prefix] [--untied]\n"
            "                               [--attn-buffers] [--activation NAME] [--inner I]\n"
            "                               [--unscaled-attn] [--attn-scale-by-layer] [--force]\n"
            "\n"
            "Writes DIR/config.json and DIR/model.safetensors: a model laid out exactly like a Hugging Face\n"
            "GPT-2 checkpoint, with GPT-2's vocabulary of 50257 tokens, but RANDOM weights: it runs every\n"
            "GPT-2 command (generate, logits, attention) and its outputs mean nothing.  GPT-2's tokenizer\n"
            "(encoder.json + vocab.bpe: the source tree's data/gpt2-tokenizer, installed in\n"
            "share/vkgraph/gpt2-tokenizer) is copied beside it.  A folder that already holds a model\n"
            "(config.json or model.safetensors) is left alone unless --force is given, or its model was\n"
            "itself written by gpt2-random (it holds RANDOM-WEIGHTS.txt).\n"
            "\n"
            "  --size NAME  the shape of a GPT-2 release: %s; sets the\n"
            "               layers, heads, width, positions and vocabulary (options after it change them)\n"
            "  --layers N   transformer blocks (default 2; GPT-2 124M has 12)\n"
            "  --heads H    attention heads per block (default 4; 124M: 12)\n"
            "  --embd C     channels, a multiple of --heads (default 64; 124M: 768)\n"
            "  --ctx P      positions, the longest sequence (default 64; 124M: 1024)\n"
            "  --seed S     the random seed (default 1): the same options give the same files\n"
            "  --vocab V    tokens (default 50257, GPT-2's; with another size no tokenizer is copied and\n"
            "               prompts are given as --ids)\n"
            "  --dtype D    f32 (default), f16 or bf16\n"
            "  --prefix     name tensors \"transformer.*\" as GPT2LMHeadModel checkpoints do\n"
            "  --untied     write a separate lm_head.weight instead of tying the head to wte\n"
            "  --attn-buffers  write the h.N.attn.bias / masked_bias buffers older checkpoints carry\n"
            "  --activation NAME  activation_function, a transformers name (default gelu_new): %s\n"
            "  --inner I    the MLP's width, n_inner (default: null, 4 * --embd)\n"
            "  --unscaled-attn       scale_attn_weights false: scores are not divided by sqrt(head size)\n"
            "  --attn-scale-by-layer scale_attn_by_inverse_layer_idx true: layer i's scores also / (i + 1)\n"
            "  --force      overwrite the model in DIR, even one that is not random\n",
            vkg_random_gpt2_size_names(), vkg_gpt2_activation_names());
}

int random_exists_in(const char *dir, const char *name) {
    char path[PATH_MAX];
    struct stat sb;
    return snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path && stat(path, &sb) == 0;
}

/* A folder's model is overwritten only when asked, or when it is random itself: a real
 * checkpoint (a download, a fine-tune) cannot be recreated, random weights can. */
int random_check_not_a_model(const char *cmd, const char *dir, int force) {
    if (force || random_exists_in(dir, VKG_RANDOM_WEIGHTS_MARKER)) return 0;
    const char *found = random_exists_in(dir, "model.safetensors")            ? "model.safetensors"
                        : random_exists_in(dir, "model.safetensors.index.json") ? "model.safetensors.index.json"
                        : random_exists_in(dir, "config.json")                  ? "config.json"
                                                                                 : NULL;
    if (!found) return 0;
    return cli_fail(cmd, "%s already holds a model (%s), which random weights would overwrite: choose another "
                    "folder, or give --force", dir, found);
}

/* Copies src to dst byte for byte.  0, or 1 after printing the error. */
static int copy_file(const char *src, const char *dst) {
    struct stat sb;
    if (stat(src, &sb) == 0 && !S_ISREG(sb.st_mode)) return cli_fail(CMD, "%s: is not a regular file", src);
    FILE *in = fopen(src, "rb");
    if (!in) return cli_fail(CMD, "cannot read %s: %s", src, strerror(errno));
    FILE *out = fopen(dst, "wb");
    if (!out) {
        fclose(in);
        return cli_fail(CMD, "cannot write %s: %s", dst, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    int bad = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) bad = 1;
    bad |= ferror(in);
    fclose(in);
    if (fclose(out) != 0) bad = 1;
    return bad ? cli_fail(CMD, "copying %s to %s failed", src, dst) : 0;
}

static int write_marker(const char *dir, const vkg_random_gpt2_options *o) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, VKG_RANDOM_WEIGHTS_MARKER);
    FILE *f = fopen(path, "w");
    if (!f) return cli_fail(CMD, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "The weights in this folder are RANDOM (vkgraph gpt2-random, seed %llu): the model has GPT-2's\n"
               "shape and vocabulary but has learned nothing.  Its text and attention patterns mean nothing.\n",
            (unsigned long long)o->seed);
    return fclose(f) == 0 ? 0 : cli_fail(CMD, "cannot write %s", path);
}

/* The options whose values the table does not store as they are. */
static int more_option(void *ctx, const char *opt, const char *val) {
    vkg_random_gpt2_options *o = ctx;
    long v = 0;
    if (strcmp(opt, "--size") == 0) {
        vkg_error err = {0};
        return vkg_random_gpt2_size(val, o, &err) == VKG_OK ? 0 : cli_fail(CMD, "--size: %s", err.message);
    }
    if (strcmp(opt, "--vocab") == 0) {
        if (cli_int(CMD, opt, val, 2, 1 << 24, &v)) return 1;
        o->vocab_size = (int)v;
        o->bos_token = o->eos_token = (int32_t)v - 1;
        return 0;
    }
    if (strcmp(opt, "--activation") == 0) {
        if (strlen(val) >= sizeof o->activation || !vkg_gpt2_activation_supported(val))
            return cli_fail(CMD, "--activation: '%s' is not supported; use one of %s", val, vkg_gpt2_activation_names());
        memset(o->activation, 0, sizeof o->activation);
        memcpy(o->activation, val, strlen(val));
        return 0;
    }
    if (strcmp(opt, "--dtype") == 0) return gpt2_cli_dtype(CMD, val, &o->dtype);
    return -1;
}

int cmd_gpt2_random(int argc, char **argv) {
    vkg_random_gpt2_options o;
    vkg_random_gpt2_options_default(&o);
    o.vocab_size = 50257;
    o.bos_token = o.eos_token = 50256;
    o.n_embd = 64;
    o.n_positions = 64;
    const char *dir = NULL;
    int force = 0;
    const cli_option opts[] = {
        CLI_OPT_SWITCH("--prefix", &o.prefix_transformer, 1),
        CLI_OPT_SWITCH("--untied", &o.untied_lm_head, 1),
        CLI_OPT_SWITCH("--attn-buffers", &o.attn_bias_buffers, 1),
        CLI_OPT_SWITCH("--unscaled-attn", &o.scale_attn_weights, 0),
        CLI_OPT_SWITCH("--attn-scale-by-layer", &o.scale_attn_by_inverse_layer_idx, 1),
        CLI_OPT_SWITCH("--force", &force, 1),
        CLI_OPT_INT("--layers", &o.n_layer, 1, 256),
        CLI_OPT_INT("--heads", &o.n_head, 1, 256),
        CLI_OPT_INT("--embd", &o.n_embd, 1, 8192),
        CLI_OPT_INT("--ctx", &o.n_positions, 1, 8192),
        CLI_OPT_INT("--inner", &o.n_inner, 1, 1 << 18),
        CLI_OPT_SEED("--seed", &o.seed),
        CLI_OPT_FOLDER(&dir),
        CLI_OPT_REFUSED("--device|--threads",
                        "gpt2-random only writes files; the commands that run the model take it"),
    };
    const int parsed = cli_options_parse(CMD, opts, sizeof opts / sizeof *opts, more_option, &o, usage, argc, argv);
    if (parsed) return parsed == CLI_HELP_SHOWN ? 0 : 1;
    if (!dir) return cli_fail(CMD, "say where to write the model: vkgraph gpt2-random DIR");
    if (o.n_embd % o.n_head)
        return cli_fail(CMD, "--embd %d must be a multiple of --heads %d", o.n_embd, o.n_head);

    if (random_check_not_a_model(CMD, dir, force)) return 1;
    vkg_error err = {0};
    if (vkg_random_gpt2_write(dir, &o, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    if (write_marker(dir, &o)) return 1;
    char tok[PATH_MAX];
    if (o.vocab_size != 50257) {
        printf("no tokenizer copied: the vocabulary has %d tokens, not GPT-2's 50257; give prompts as --ids\n",
               o.vocab_size);
    } else if (!gpt2_cli_project_tokenizer(tok, sizeof tok)) {
        return cli_fail(CMD, "wrote the model, but GPT-2's tokenizer was not found to copy beside it: set "
                        "VKG_GPT2_TOKENIZER to the source tree's data/gpt2-tokenizer, or give prompts as --ids");
    } else {
        static const char *const files[] = {"encoder.json", "vocab.bpe"};
        for (int i = 0; i < 2; i++) {
            char src[PATH_MAX + 16], dst[PATH_MAX + 16];
            snprintf(src, sizeof src, "%s/%s", tok, files[i]);
            snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
            if (copy_file(src, dst)) return 1;
        }
    }
    const vkg_random_gpt2_options *c = &o;
    static const char *const dtype_names[] = {[VKG_WEIGHTS_AS_STORED] = "F32", [VKG_WEIGHTS_F32] = "F32",
                                              [VKG_WEIGHTS_F16] = "F16", [VKG_WEIGHTS_BF16] = "BF16"};
    printf("wrote a GPT-2-shaped model with RANDOM weights to %s: %d layers, %d heads, %d channels, %d positions, "
           "%d tokens, %lld parameters (%s, %s); its outputs mean nothing\n",
           dir, c->n_layer, c->n_head, c->n_embd, c->n_positions, c->vocab_size,
           (long long)vkg_random_gpt2_parameter_count(c), dtype_names[o.dtype], c->activation);
    return 0;
}
