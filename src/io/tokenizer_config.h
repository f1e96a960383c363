/*
 * tokenizer_config.json, the file transformers reads beside tokenizer.json: the special tokens'
 * text (bos_token, eos_token), the class (tokenizer_class) and the switches some classes honour
 * (add_bos_token, add_eos_token).  Read by the tokenizer (its eos and post-processor), the chat
 * template (bos_token / eos_token in the render) and the model's stop ids.
 */
#ifndef VKG_IO_TOKENIZER_CONFIG_H
#define VKG_IO_TOKENIZER_CONFIG_H

#include "base/json.h"
#include "vkgraph.h"

/* bos_token / eos_token: a string, an AddedToken object {"content": ...}, or absent / null (*out
 * NULL).  path names the file in messages. */
vkg_status vkg_tokenizer_config_token(const vkg_json *cfg, const char *key, const char *path, const char **out,
                                      vkg_error *err);

/* dir/tokenizer_config.json parsed into *out; *out NULL (and VKG_OK) when the folder has none. */
vkg_status vkg_tokenizer_config_read(const char *dir, vkg_json **out, char **path, vkg_error *err);

/* 1 when transformers' class tokenizer_class rebuilds the post-processor from add_bos_token /
 * add_eos_token (LlamaTokenizerFast and CodeLlama's: update_post_processor, with "<s>" and
 * "</s>" when the file names no bos_token / eos_token); other
 * classes keep tokenizer.json's post-processor whatever those keys say. */
int vkg_tokenizer_config_honours_add_tokens(const vkg_json *cfg);

#endif
