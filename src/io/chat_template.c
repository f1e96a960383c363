/* A model's chat template (vkgraph_template.h): tokenizer_config.json read with the project's JSON
 * reader, the template parsed once, and each render given the variables apply_chat_template
 * passes: messages, bos_token, eos_token, add_generation_prompt, then the caller's extras. */
#include "vkgraph_template.h"

#include "base/error.h"
#include "base/json.h"
#include "io/jinja.h"
#include "io/tokenizer_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct vkg_chat_template {
    jinja_template *tpl;
    char *bos, *eos;
};

static char *dup_or_empty(const char *s) {
    const char *v = s ? s : "";
    char *d = malloc(strlen(v) + 1);
    if (d) strcpy(d, v);
    return d;
}

vkg_status vkg_chat_template_parse(const char *text, size_t len, const char *bos_token, const char *eos_token,
                                   vkg_chat_template **out, vkg_error *err) {
    *out = NULL;
    if (!text) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "chat template: no text");
    vkg_chat_template *t = calloc(1, sizeof *t);
    if (!t || !(t->bos = dup_or_empty(bos_token)) || !(t->eos = dup_or_empty(eos_token))) {
        vkg_chat_template_free(t);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    }
    vkg_status st = jinja_parse(text, len, &t->tpl, err);
    if (st != VKG_OK) {
        vkg_chat_template_free(t);
        return st;
    }
    *out = t;
    return VKG_OK;
}

vkg_status vkg_chat_template_load(const char *path, vkg_chat_template **out, vkg_error *err) {
    *out = NULL;
    char file[4096];
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if ((size_t)snprintf(file, sizeof file, "%s/tokenizer_config.json", path) >= sizeof file)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "path too long: %s", path);
    } else if ((size_t)snprintf(file, sizeof file, "%s", path) >= sizeof file) {
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "path too long: %s", path);
    }
    vkg_json *cfg = NULL;
    vkg_status st = vkg_json_parse_file(file, &cfg, err);
    if (st != VKG_OK) return st;
    const vkg_json *tv = vkg_json_get(cfg, "chat_template");
    if (vkg_json_type_of(tv) == VKG_JSON_ARRAY) { /* named templates: take "default" */
        const vkg_json *found = NULL;
        for (size_t i = 0; i < vkg_json_length(tv); i++) {
            const char *name = vkg_json_string(vkg_json_get(vkg_json_at(tv, i), "name"), NULL);
            if (name && !strcmp(name, "default")) found = vkg_json_get(vkg_json_at(tv, i), "template");
        }
        tv = found;
    }
    size_t len = 0;
    const char *text = vkg_json_string(tv, &len);
    const char *bos = NULL, *eos = NULL;
    if (!text) {
        st = vkg_error_set(err, VKG_ERR_NOT_FOUND, "%s holds no chat_template (a string, or a list with one named \"default\")", file);
    } else if ((st = vkg_tokenizer_config_token(cfg, "bos_token", file, &bos, err)) == VKG_OK &&
               (st = vkg_tokenizer_config_token(cfg, "eos_token", file, &eos, err)) == VKG_OK) {
        st = vkg_chat_template_parse(text, len, bos, eos, out, err);
        if (st != VKG_OK && err) {
            char msg[sizeof err->message];
            snprintf(msg, sizeof msg, "%s", err->message);
            vkg_error_set(err, st, "%s: chat_template: %s", file, msg);
        }
    }
    vkg_json_free(cfg);
    return st;
}

static void write_string_or_null(FILE *f, const char *s) { vkg_json_write_string(f, s); }

vkg_status vkg_chat_template_render(const vkg_chat_template *t, const char *messages_json, size_t len,
                                    const vkg_chat_render_options *opt, char **out, size_t *out_len, vkg_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !messages_json) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "chat template: nothing to render");
    vkg_json *msgs = NULL;
    vkg_status st = vkg_json_parse(messages_json, len, &msgs, err);
    if (st != VKG_OK) {
        if (err) {
            char msg[sizeof err->message];
            snprintf(msg, sizeof msg, "%s", err->message);
            vkg_error_set(err, st, "messages: %s", msg);
        }
        return st;
    }
    vkg_json_type ty = vkg_json_type_of(msgs);
    if (ty != VKG_JSON_ARRAY && !(ty == VKG_JSON_OBJECT && vkg_json_type_of(vkg_json_get(msgs, "messages")) == VKG_JSON_ARRAY)) {
        vkg_json_free(msgs);
        return vkg_error_set(err, VKG_ERR_FORMAT, "messages: expected a JSON array of messages, or an object holding \"messages\" (an array)");
    }
    /* The context as one JSON object: the fixed variables first, then the caller's extras (a
     * caller's key repeating one of the fixed ones is refused as a duplicate key). */
    char *ctx_text = NULL;
    size_t ctx_len = 0;
    FILE *f = open_memstream(&ctx_text, &ctx_len);
    if (!f) {
        vkg_json_free(msgs);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    }
    fputs("{\"bos_token\": ", f);
    write_string_or_null(f, t->bos);
    fputs(", \"eos_token\": ", f);
    write_string_or_null(f, t->eos);
    fprintf(f, ", \"add_generation_prompt\": %s", opt && opt->add_generation_prompt ? "true" : "false");
    if (ty == VKG_JSON_ARRAY) {
        fputs(", \"messages\": ", f);
        fwrite(messages_json, 1, len, f);
        fputs("}", f);
    } else {
        /* splice the caller's object in: its keys after ours */
        const char *brace = memchr(messages_json, '{', len);
        size_t rest = len - (size_t)(brace - messages_json) - 1;
        fputs(", ", f);
        fwrite(brace + 1, 1, rest, f);
    }
    int bad = ferror(f);
    fclose(f);
    vkg_json_free(msgs);
    if (bad || !ctx_text) {
        free(ctx_text);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    }
    vkg_json *ctx = NULL;
    st = vkg_json_parse(ctx_text, ctx_len, &ctx, err);
    free(ctx_text);
    if (st != VKG_OK) {
        /* only a caller's key repeating one of ours gets here */
        if (!err) return st;
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%s", err->message);
        return vkg_error_set(err, VKG_ERR_FORMAT, "messages: %s (bos_token, eos_token and add_generation_prompt are set from the config and options)", msg);
    }
    jinja_options jo = {.max_output = opt ? opt->max_output : 0, .now = opt ? (time_t)opt->now : 0};
    st = jinja_render_template(t->tpl, ctx, &jo, out, out_len, err);
    vkg_json_free(ctx);
    return st;
}

void vkg_chat_template_free(vkg_chat_template *t) {
    if (!t) return;
    jinja_template_free(t->tpl);
    free(t->bos);
    free(t->eos);
    free(t);
}
