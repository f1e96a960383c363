/* vkgraph: the command-line tool.  Dispatches to one function per command. */
#include "base/end_now.h"
#include "cli.h"
#include "commands.h"
#include "vkgraph.h"

#include <stdio.h>
#include <string.h>

static const vkg_command commands[] = {
    {"devices", cmd_devices, "list every Vulkan device with its limits and features", CMD_DEVICE},
    {"dump", cmd_dump, "print a graph or its compiled plan (text, DOT or JSON)", CMD_DEVICE},
    {"tokenize", cmd_tokenize, "text to a tokenizer's token ids and back", 0},
    {"template", cmd_template, "render a chat template over a conversation (apply_chat_template)", 0},
    {"generate", cmd_generate, "continue a prompt with a model (greedy or sampled), streaming tokens", CMD_DEVICE | CMD_PROFILE},
    {"chat", cmd_chat, "talk with an instruct model through its chat template, the KV cache kept between turns", CMD_DEVICE},
    {"logits", cmd_logits, "a model's next-token logits for a prompt, as a .npy file", CMD_DEVICE | CMD_PROFILE},
    {"attention", cmd_attention, "which earlier token each head attends to, as a table and a heatmap", CMD_DEVICE | CMD_PROFILE},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server for a model (completions, streamed or not)", CMD_DEVICE},
    {"random", cmd_random, "write a model with random weights and a real model's shapes (llama, qwen2, ...)", 0},
    {"gpt2-random", cmd_gpt2_random, "write a GPT-2-shaped model with random weights (for offline use)", 0},
    {"conformance", cmd_conformance, "check a device against the CPU reference, op by op (pass/fail table)", CMD_DEVICE | CMD_PROFILE},
    {"compare", cmd_compare, "run a model step by step on two devices and name the first step where they part", CMD_DEVICE | CMD_PROFILE},
    {"bench", cmd_bench, "a model's prefill and decode speed; matmul GFLOP/s and block time, CPU and Vulkan", CMD_DEVICE | CMD_PROFILE},
    {"lesson", cmd_lesson, "the attention-and-transformers lesson, step by step (1-7)", CMD_DEVICE | CMD_PROFILE},
};
static const int n_commands = (int)(sizeof commands / sizeof commands[0]);

static void list_commands(FILE *f, int flag) {
    for (int i = 0, n = 0; i < n_commands; i++)
        if (commands[i].flags & flag) fprintf(f, "%s%s", n++ ? ", " : "", commands[i].name);
}

static void usage(FILE *f) {
    fprintf(f, "vkgraph %s: transformer models as op graphs on any Vulkan GPU or the CPU\n\n", VKG_VERSION_STRING);
    fprintf(f, "usage: vkgraph COMMAND [OPTIONS]   (vkgraph COMMAND --help for its options)\n\ncommands:\n");
    for (int i = 0; i < n_commands; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\noptions of the commands that open a device (");
    list_commands(f, CMD_DEVICE);
    fprintf(f, "):\n"
               "  --device D       cpu, vulkan or vulkan:N (default: the best Vulkan GPU, else the CPU)\n"
               "\noptions of the commands that run graphs (");
    list_commands(f, CMD_PROFILE);
    fprintf(f, "):\n"
               "  --profile        print the time of every step of every run, per session, and write a\n"
               "                   Chrome trace (chrome://tracing, Perfetto) to " CLI_TRACE_DEFAULT "\n"
               "  --trace FILE     the same, with the trace written to FILE\n"
               "  --group-by G     the same, and after each session's table its time summed by layer\n"
               "                   (G = layer), by op kind (G = op), or both (G = layer,op)\n"
               "The others refuse them.\n"
               "environment: VKG_VALIDATION=1 runs Vulkan with the Khronos validation layer\n");
}

int main(int argc, char **argv) {
    cli_output_guard();
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("vkgraph %s\n", VKG_VERSION_STRING);
        return cli_output_finish("--version", 0);
    }
    for (int i = 0; i < n_commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            int n = argc - 1;
            char **args = argv + 1;
            int rc = cli_args_normalize(commands[i].name, &n, &args) || cli_take_common_options(&n, args, commands[i].flags & CMD_PROFILE);
            if (rc == 0) rc = commands[i].run(n, args);
            rc = cli_output_finish(commands[i].name, rc);
            cli_args_free();
            if (cli_device_work_abandoned()) vkg_end_now(rc); /* the driver's threads may still run */
            return rc;
        }
    const char *names[sizeof commands / sizeof commands[0]];
    for (int i = 0; i < n_commands; i++) names[i] = commands[i].name;
    const char *meant = cli_closest(argv[1], names, n_commands);
    if (meant) fprintf(stderr, "vkgraph: unknown command '%s'; did you mean '%s'?\n", argv[1], meant);
    else fprintf(stderr, "vkgraph: unknown command '%s' (vkgraph --help lists the commands)\n", argv[1]);
    return 1;
}
