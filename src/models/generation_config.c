/* generation_config.json and the stop ids (see generation_config.h). */
#include "models/generation_config.h"

#include "base/error.h"
#include "base/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Keys of GenerationConfig that change which token is chosen (or when generation stops) and
 * that vkgraph does not apply, with the value that leaves the choice as it is: a file giving
 * another value gets a note naming the key.  (A key not in any list below gets the note too:
 * what it does is not known here.) */
static const struct {
    const char *key;
    double neutral;
} not_applied[] = {
    {"num_beams", 1},           {"num_beam_groups", 1},        {"typical_p", 1},
    {"epsilon_cutoff", 0},      {"eta_cutoff", 0},             {"diversity_penalty", 0},
    {"encoder_repetition_penalty", 1}, {"no_repeat_ngram_size", 0}, {"encoder_no_repeat_ngram_size", 0},
    {"min_length", 0},          {"guidance_scale", 1},         {"renormalize_logits", 0},
    {"remove_invalid_values", 0}, {"token_healing", 0},
    /* null unless set: any value changes the choice */
    {"penalty_alpha", NAN},     {"bad_words_ids", NAN},        {"force_words_ids", NAN},
    {"forced_bos_token_id", NAN}, {"forced_eos_token_id", NAN}, {"exponential_decay_length_penalty", NAN},
    {"suppress_tokens", NAN},   {"begin_suppress_tokens", NAN}, {"sequence_bias", NAN},
    {"min_new_tokens", NAN},    {"stop_strings", NAN},         {"constraints", NAN},
    {"dola_layers", NAN},       {"watermarking_config", NAN},  {"max_time", NAN},
    {"top_h", NAN},
};

/* Keys read above (or in read_sampling), and keys that do not change the tokens chosen. */
static const char *const known[] = {
    "bos_token_id", "eos_token_id", "do_sample", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
    "max_new_tokens", "max_length",
    "pad_token_id", "decoder_start_token_id", "transformers_version", "_from_model_config", "use_cache",
    "output_attentions", "output_hidden_states", "output_scores", "output_logits", "return_dict_in_generate",
    "num_return_sequences", "cache_implementation", "cache_config", "return_legacy_cache", "length_penalty",
    "early_stopping", "low_memory", "prompt_lookup_num_tokens", "max_matching_ngram_size",
    "assistant_confidence_threshold", "num_assistant_tokens", "num_assistant_tokens_schedule",
    "assistant_early_exit", "assistant_lookbehind", "target_lookbehind", "is_assistant", "compile_config",
    "disable_compile", "trust_remote_code", "generation_kwargs", "use_model_defaults",
};

static void add_note(vkg_generation_config *gc, const char *key, const vkg_json *v) {
    const size_t used = strlen(gc->note);
    if (used + 1 >= sizeof gc->note) return;
    char value[32] = "";
    if (vkg_json_type_of(v) == VKG_JSON_NUMBER) snprintf(value, sizeof value, " %g", vkg_json_number(v));
    else if (vkg_json_type_of(v) == VKG_JSON_BOOL) snprintf(value, sizeof value, " %s", vkg_json_bool(v) ? "true" : "false");
    snprintf(gc->note + used, sizeof gc->note - used, "%s%.60s%s", used ? ", " : "generation_config.json: not applied: ",
             key, value);
}

/* Notes each key that would change the tokens chosen and is not applied. */
static void note_keys(const vkg_json *root, vkg_generation_config *gc) {
    for (size_t i = 0; i < vkg_json_length(root); i++) {
        const char *key = vkg_json_key_at(root, i, NULL);
        const vkg_json *v = vkg_json_at(root, i);
        int listed = 0;
        for (size_t k = 0; !listed && k < sizeof known / sizeof *known; k++) listed = strcmp(key, known[k]) == 0;
        if (listed) continue;
        size_t k = 0;
        while (k < sizeof not_applied / sizeof *not_applied && strcmp(key, not_applied[k].key) != 0) k++;
        if (k < sizeof not_applied / sizeof *not_applied) {
            const vkg_json_type t = vkg_json_type_of(v);
            const double neutral = not_applied[k].neutral;
            if (t == VKG_JSON_NULL) continue;
            if (t == VKG_JSON_NUMBER && vkg_json_number(v) == neutral) continue;
            if (t == VKG_JSON_BOOL && !isnan(neutral) && vkg_json_bool(v) == (neutral != 0)) continue;
            if ((t == VKG_JSON_ARRAY || t == VKG_JSON_OBJECT) && vkg_json_length(v) == 0) continue;
        }
        add_note(gc, key, v);
    }
}

/* A number key checked as transformers' GenerationConfig.validate / the warpers check it. */
static vkg_status read_number(const vkg_json *root, const char *path, const char *key, double lo, double hi,
                              int lo_open, double *out, vkg_error *err) {
    int found = 0;
    double d = *out;
    vkg_status st = vkg_config_number(root, key, &d, &found, err);
    if (st != VKG_OK) return vkg_error_set(err, st, "%s: \"%s\" must be a finite number", path, key);
    if (found && (d < lo || d > hi || (lo_open && d == lo)))
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: \"%s\" is %g; it must lie in %s%g, %g]", path, key, d,
                             lo_open ? "(" : "[", lo, hi);
    *out = d;
    return VKG_OK;
}

static vkg_status read_int(const vkg_json *root, const char *path, const char *key, int lo, int *out, vkg_error *err) {
    int found = 0, v = *out;
    vkg_status st = vkg_config_int(root, key, &v, &found, err);
    if (st != VKG_OK) return vkg_error_set(err, st, "%s: \"%s\" must be a whole number", path, key);
    if (found && v < lo) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: \"%s\" is %d; it must be %d or more", path, key, v, lo);
    *out = v;
    return VKG_OK;
}

static vkg_status read_sampling(const vkg_json *root, const char *path, vkg_generation_config *gc, vkg_error *err) {
    vkg_status st = vkg_config_bool(root, "do_sample", &gc->do_sample, err);
    if (st != VKG_OK) return vkg_error_set(err, st, "%s: \"do_sample\" must be true or false", path);
    if ((st = read_number(root, path, "temperature", 0, 1e6, 0, &gc->temperature, err)) ||
        (st = read_number(root, path, "top_p", 0, 1, 1, &gc->top_p, err)) ||
        (st = read_number(root, path, "min_p", 0, 1, 0, &gc->min_p, err)) ||
        (st = read_number(root, path, "repetition_penalty", 0, 1e6, 1, &gc->repetition_penalty, err)) ||
        (st = read_int(root, path, "top_k", 0, &gc->top_k, err)) ||
        (st = read_int(root, path, "max_new_tokens", 1, &gc->max_new_tokens, err)) ||
        (st = read_int(root, path, "max_length", 1, &gc->max_length, err)))
        return st;
    return VKG_OK;
}

/* dir/name parsed when the file is there; *root NULL when it is not. */
static vkg_status read_json(const char *dir, const char *name, vkg_json **root, char **path, vkg_error *err) {
    *root = NULL;
    if (!(*path = malloc(strlen(dir) + strlen(name) + 2))) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    sprintf(*path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(*path, &sb) != 0) return VKG_OK;
    vkg_status st = vkg_json_parse_file(*path, root, err);
    if (st == VKG_OK && vkg_json_type_of(*root) != VKG_JSON_OBJECT)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: expected a JSON object", *path);
    return st;
}

/* The eos list of one file into gc (its bos too when want_bos); *found says whether it named one. */
static vkg_status read_ids(const vkg_json *root, const char *path, int n_vocab, int want_bos,
                           vkg_generation_config *gc, int *found, vkg_error *err) {
    vkg_status st = vkg_config_token_list(root, "eos_token_id", n_vocab, gc->stop_ids, VKG_CONFIG_MAX_TOKEN_IDS,
                                          &gc->n_stop, found, gc->note, sizeof gc->note, err);
    if (st == VKG_OK && want_bos) {
        int32_t bos[VKG_CONFIG_MAX_TOKEN_IDS];
        int n = 0;
        st = vkg_config_token_list(root, "bos_token_id", n_vocab, bos, VKG_CONFIG_MAX_TOKEN_IDS, &n, NULL, gc->note,
                                   sizeof gc->note, err);
        if (n) gc->bos_token = bos[0];
    }
    if (st != VKG_OK && err) {
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%s", err->message);
        vkg_error_set(err, st, "%s: %s", path, msg);
    }
    if (st == VKG_OK && vkg_json_type_of(vkg_json_get(root, "eos_token_id")) == VKG_JSON_NULL) *found = 0;
    return st;
}

vkg_status vkg_generation_config_read(const char *dir, int n_vocab, vkg_generation_config *gc, vkg_error *err) {
    memset(gc, 0, sizeof *gc);
    gc->bos_token = VKG_NO_TOKEN;
    gc->temperature = gc->top_p = gc->repetition_penalty = 1.0;
    gc->top_k = 50;
    vkg_json *root = NULL;
    char *path = NULL;
    int found = 0;
    vkg_status st = read_json(dir, "generation_config.json", &root, &path, err);
    if (st == VKG_OK && root) {
        gc->present = 1;
        st = read_ids(root, path, n_vocab, 1, gc, &found, err);
        if (st == VKG_OK) st = read_sampling(root, path, gc, err);
        if (st == VKG_OK) note_keys(root, gc);
    }
    vkg_json_free(root);
    free(path);
    root = NULL;
    path = NULL;
    if (st == VKG_OK && !found) { /* transformers' from_model_config: config.json's eos list */
        char note[sizeof gc->note]; /* the model's own note names config.json's ids already */
        memcpy(note, gc->note, sizeof note);
        st = read_json(dir, "config.json", &root, &path, err);
        if (st == VKG_OK && root) st = read_ids(root, path, n_vocab, 0, gc, &found, err);
        memcpy(gc->note, note, sizeof note);
        vkg_json_free(root);
        free(path);
    }
    return st;
}

void vkg_generation_config_finish_stops(vkg_generation_config *gc, int32_t model_eos, int32_t tok_eos) {
    if (gc->n_stop) return;
    const int32_t id = model_eos != VKG_NO_TOKEN ? model_eos : tok_eos;
    if (id != VKG_NO_TOKEN && id >= 0) gc->stop_ids[gc->n_stop++] = id;
}

void vkg_generation_config_options(const vkg_generation_config *gc, vkg_generate_options *o) {
    vkg_generate_options_default(o);
    if (gc->max_new_tokens) o->max_tokens = gc->max_new_tokens;
    vkg_sampling_options *s = &o->sampling;
    /* the repetition penalty is a logits processor: greedy choices get it too, over every token
     * of the context (transformers' input_ids) */
    if (gc->repetition_penalty != 1.0) {
        s->repeat_penalty = (float)gc->repetition_penalty;
        s->repeat_last_n = -1;
    }
    if (!gc->do_sample) return; /* greedy, whatever temperature and top_p say (transformers warns) */
    s->temperature = (float)gc->temperature;
    s->top_k = gc->top_k;
    s->top_p = (float)gc->top_p;
    s->min_p = (float)gc->min_p;
}
