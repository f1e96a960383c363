/* `vkgraph template`: renders a model's chat template over a conversation, as transformers'
 * apply_chat_template(messages, add_generation_prompt=True, tokenize=False) does. */
#include "cli.h"
#include "commands.h"
#include "vkgraph_template.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "template"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph template (-m DIR | --tokenizer DIR) --messages FILE.json [--no-generation-prompt]\n"
            "                        [--now SECONDS]\n"
            "\n"
            "Renders the chat template of a model's tokenizer_config.json over a conversation and prints\n"
            "the prompt text, byte for byte as transformers' apply_chat_template(..., tokenize=False).\n"
            "\n"
            "  -m, --model DIR         a model directory (or its tokenizer_config.json)\n"
            "  --tokenizer DIR         the same: where tokenizer_config.json is\n"
            "  --messages FILE         a JSON array of {\"role\", \"content\"} messages, or an object holding\n"
            "                          \"messages\" and other variables the template reads (\"-\": standard input)\n"
            "  --no-generation-prompt  do not end with the assistant's header (add_generation_prompt=False)\n"
            "  --now SECONDS           the time strftime_now formats, in seconds since 1970 UTC (default: the\n"
            "                          local clock), for reproducible output\n"
            "  -h, --help              show this help\n"
            "\n"
            "docs/TEMPLATES.md lists the Jinja supported; a template using anything else is refused.\n");
}

int cmd_template(int argc, char **argv) {
    const char *dir = NULL, *messages = NULL, *now_text = NULL;
    int generation_prompt = 1;
    const cli_option opts[] = {
        CLI_OPT_SWITCH("--no-generation-prompt", &generation_prompt, 0),
        CLI_OPT_TEXT("-m|--model|--tokenizer", &dir),
        CLI_OPT_TEXT("--messages", &messages),
        CLI_OPT_TEXT("--now", &now_text),
        CLI_OPT_REFUSED("--device|--threads|--dtype", "template reads only tokenizer_config.json and runs no model"),
    };
    const int parsed = cli_options_parse(CMD, opts, sizeof opts / sizeof *opts, NULL, NULL, usage, argc, argv);
    if (parsed) return parsed == CLI_HELP_SHOWN ? 0 : 1;
    if (!dir) return cli_fail(CMD, "say where tokenizer_config.json is: -m DIR or --tokenizer DIR");
    if (!messages) return cli_fail(CMD, "give the conversation: --messages FILE.json");
    long now = 0;
    if (now_text && cli_int(CMD, "--now", now_text, 1, 253402300799L, &now)) return 1;

    vkg_error err;
    vkg_chat_template *t = NULL;
    if (vkg_chat_template_load(dir, &t, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    size_t len = 0;
    char *text = cli_read_file(CMD, messages, &len);
    if (!text) {
        vkg_chat_template_free(t);
        return 1;
    }
    vkg_chat_render_options opt = {.add_generation_prompt = generation_prompt, .now = now};
    char *out = NULL;
    size_t out_len = 0;
    vkg_status st = vkg_chat_template_render(t, text, len, &opt, &out, &out_len, &err);
    free(text);
    vkg_chat_template_free(t);
    if (st != VKG_OK) return cli_fail(CMD, "%s", err.message);
    int rc = fwrite(out, 1, out_len, stdout) == out_len && fflush(stdout) == 0 ? 0
             : cli_fail(CMD, "cannot write the text: %s", strerror(errno));
    free(out);
    return rc;
}
