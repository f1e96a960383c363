/*
 * Chat templates: the Jinja program in a model's tokenizer_config.json ("chat_template") that
 * turns a conversation into the prompt text the instruct model was trained on, rendered as
 * transformers' apply_chat_template(messages, add_generation_prompt=..., tokenize=False) does,
 * byte for byte.  docs/TEMPLATES.md lists the Jinja this supports; a template using anything
 * else is refused when loaded, naming the construct and its line.
 */
#ifndef VKGRAPH_TEMPLATE_H
#define VKGRAPH_TEMPLATE_H

#include "vkgraph.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vkg_chat_template vkg_chat_template;

/* path: a directory holding tokenizer_config.json, or that file.  Reads chat_template (a string,
 * or a list of {"name", "template"} of which "default" is taken) and bos_token / eos_token (a
 * string or an added-token object {"content": ...}; absent ones render as ""). */
vkg_status vkg_chat_template_load(const char *path, vkg_chat_template **out, vkg_error *err);
/* The same from the template's text; bos / eos may be NULL. */
vkg_status vkg_chat_template_parse(const char *text, size_t len, const char *bos_token, const char *eos_token,
                                   vkg_chat_template **out, vkg_error *err);

typedef struct vkg_chat_render_options {
    int add_generation_prompt; /* 1: end with the header of the assistant's turn */
    long long now;             /* seconds since 1970 (UTC) that strftime_now formats; 0: the local clock */
    size_t max_output;         /* bytes; 0: 8 MiB */
} vkg_chat_render_options;

/* messages_json: a JSON array of messages ({"role": ..., "content": ...}), or an object holding
 * "messages" and any other variables the template reads (tools, date_string, enable_thinking...),
 * as keyword arguments of apply_chat_template.  *out is NUL-terminated; free it with free(). */
vkg_status vkg_chat_template_render(const vkg_chat_template *t, const char *messages_json, size_t len,
                                    const vkg_chat_render_options *opt, char **out, size_t *out_len, vkg_error *err);
void vkg_chat_template_free(vkg_chat_template *t); /* NULL is fine */

#ifdef __cplusplus
}
#endif

#endif
