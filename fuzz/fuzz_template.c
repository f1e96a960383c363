/* Chat templates (vkgraph_template.h): the bytes before FUZZ_SEPARATOR are a Jinja template, those
 * after it the messages JSON.  Whatever they are, parsing and rendering either succeed or fail
 * with a message; a success gives NUL-terminated text within the output bound, and rendering the
 * same input twice gives the same bytes (no state leaks between renders). */
#include "fuzz.h"

#include "vkgraph_template.h"

#include <stdlib.h>
#include <string.h>

#define MAX_OUTPUT (64 << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *tpl, *msgs;
    size_t tpl_len, msgs_len;
    fuzz_split(data, size, &tpl, &tpl_len, &msgs, &msgs_len);
    vkg_error err;
    err.message[0] = 0;
    vkg_chat_template *t = NULL;
    if (vkg_chat_template_parse((const char *)tpl, tpl_len, "<s>", "</s>", &t, &err) != VKG_OK) {
        FUZZ_CHECK(t == NULL && err.message[0] != 0);
        return 0;
    }
    if (msgs_len == 0) { /* no separator: a fixed conversation */
        msgs = (const uint8_t *)"[{\"role\": \"user\", \"content\": \"hi\"}]";
        msgs_len = strlen((const char *)msgs);
    }
    vkg_chat_render_options opt = {.add_generation_prompt = 1, .now = 1796208000, .max_output = MAX_OUTPUT};
    char *a = NULL, *b = NULL;
    size_t a_len = 0, b_len = 0;
    err.message[0] = 0;
    vkg_status sa = vkg_chat_template_render(t, (const char *)msgs, msgs_len, &opt, &a, &a_len, &err);
    if (sa != VKG_OK) {
        FUZZ_CHECK(a == NULL && err.message[0] != 0);
    } else {
        FUZZ_CHECK(a != NULL && a_len <= MAX_OUTPUT && a[a_len] == 0);
    }
    vkg_status sb = vkg_chat_template_render(t, (const char *)msgs, msgs_len, &opt, &b, &b_len, &err);
    FUZZ_CHECK(sa == sb);
    if (sa == VKG_OK) FUZZ_CHECK(a_len == b_len && memcmp(a, b, a_len) == 0);
    free(a);
    free(b);
    vkg_chat_template_free(t);
    return 0;
}
