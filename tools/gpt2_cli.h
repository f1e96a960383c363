/* What the GPT-2 commands (generate, logits, attention) share: the options that name a model, a
 * prompt and a device; loading the model and its tokenizer; turning the prompt into ids; and
 * printing tokens. */
#ifndef VKG_GPT2_CLI_H
#define VKG_GPT2_CLI_H

#include "vkgraph_model.h"
#include "vkgraph_template.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct gpt2_cli {
    const char *cmd;                     /* "generate", for messages                         */
    const char *model_dir, *prompt, *file, *ids_text, *device;
    long threads;                        /* CPU executor threads; 0 = every core             */
    int more_devices;                    /* the command opens another device too (compare's
                                            reference), which --threads may be for: it checks
                                            --threads itself                                  */
    vkg_model_options model_opts;        /* how the model is opened (all zero: the defaults)  */
    const vkg_chat_template *chat;       /* non-NULL: the prompt text is one user message, put
                                            through this template (add_generation_prompt) and
                                            tokenized as apply_chat_template(tokenize=True)   */
    vkg_device *dev;
    vkg_model *model;
    vkg_model_info info;                 /* the model's facts                                */
    const vkg_tokenizer *tok;            /* NULL when the model has none and ids were given   */
    int32_t *ids;
    size_t n_ids;
} gpt2_cli;

/* --dtype's value: f32, f16 or bf16, in any case ("F16" as safetensors names it).  0, or 1 after
 * printing the error. */
int gpt2_cli_dtype(const char *cmd, const char *text, vkg_weight_dtype *out);

/* The common options' help lines. */
void gpt2_cli_usage_common(FILE *f);

/* Takes argv[*i] when it is a common option (-m, -p, -f, --ids, --device, --threads, --dtype), advancing
 * *i past its value: returns 1 when taken, 0 when it is not a common option, -1 after printing
 * an error. */
int gpt2_cli_option(gpt2_cli *c, int argc, char **argv, int *i);

/* After the options: checks that -m and exactly one prompt form were given, opens --device
 * (default: the best one) and the model on it, with its tokenizer
 * (the model folder's files, or the project's GPT-2 tokenizer when the model has
 * GPT-2's 50257 tokens, saying so on stderr; none is needed when the prompt is --ids), turns the
 * prompt into ids and checks them against the model.  empty_is_eot: an empty prompt becomes the
 * start token bos_token_id alone (for GPT-2 the end-of-text token, its start for unconditional
 * text; an error when the model has none), else it is an error.  Returns 0, or 1 after printing
 * the error. */
int gpt2_cli_load(gpt2_cli *c, int empty_is_eot);
void gpt2_cli_free(gpt2_cli *c);

/* The model for people: "GPT-2", or another architecture by its config.json model_type ("llama"). */
const char *gpt2_cli_model_name(const gpt2_cli *c);

/* The chat template of the model in dir (tokenizer_config.json's chat_template), for the
 * commands that talk with instruct models: 0, or 1 after a message that names the missing key
 * when the folder has none. */
int gpt2_cli_chat_template(const char *cmd, const char *dir, vkg_chat_template **out);

/* A token's raw bytes (not NUL-terminated) or, without a tokenizer, "[id]" in buf. */
const char *gpt2_cli_token(const gpt2_cli *c, int32_t id, char *buf, size_t size, size_t *len);

/* The token as Python's repr() shows a str: '...' or "..." when it holds a single quote and no
 * double quote, escapes for backslash, the quote and unprintable characters, invalid UTF-8
 * shown as U+FFFD as Hugging Face's decode gives it.  Returns the number of characters (code
 * points), for padding. */
int gpt2_cli_repr(const char *bytes, size_t len, char *out, size_t size);

/* The project's GPT-2 tokenizer folder: $VKG_GPT2_TOKENIZER, else data/gpt2-tokenizer found from
 * the executable's folder (a build folder in the source tree, or an installed share/vkgraph).
 * 1 when found (out holds it), else 0. */
int gpt2_cli_project_tokenizer(char *out, size_t size);

#endif
