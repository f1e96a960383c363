/* `vkgraph serve`: an OpenAI-compatible HTTP server for a model (docs/SERVER.md). */
#include "cli.h"
#include "cli_args.h"
#include "commands.h"
#include "gpt2_cli.h"
#include "server/server.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "serve"

static void usage(FILE *f) {
    vkg_batch_options batch;
    vkg_batch_options_default(&batch);
    fprintf(f,
            "usage: vkgraph serve -m DIR [--host ADDR] [--port N] [--parallel N] [--queue N] [--ctx-size N]\n"
            "                     [--prefill-chunk N] [--timeout S] [--api-key KEY] [--device D] [--threads N]\n"
            "\n"
            "Serves the model over HTTP with OpenAI's API: POST /v1/completions and\n"
            "/v1/chat/completions (streamed or not; chat with the chat template of the model's\n"
            "tokenizer_config.json), GET /v1/models, GET /health, GET /metrics (Prometheus), POST /tokenize, POST /detokenize.\n"
            "N slots generate at once, each with its own KV cache, all advanced in one batched step per\n"
            "token; up to --queue more requests wait for a slot, and beyond them a request is answered\n"
            "503.  SIGINT or SIGTERM stops it: requests running are cancelled and answered, and it exits 0.\n"
            "docs/SERVER.md describes every field and error.\n"
            "\n"
            "  -m, --model DIR   the model folder (config.json, model.safetensors, tokenizer files)\n"
            "  --host ADDR       the IPv4 address to listen on (default 127.0.0.1; 0.0.0.0: every one)\n"
            "  --port N          the TCP port (default 8080; 0: any free one, printed at start)\n"
            "  --parallel N      slots: sequences generated at once (default 1)\n"
            "  --queue N         requests that may wait for a slot (default 64)\n"
            "  --ctx-size N      positions of each slot's KV cache (default: the model's context, or\n"
            "                    where the device cannot bind N slots that long, the largest half,\n"
            "                    quarter, ... of it that it can; stderr says so)\n"
            "  --prefill-chunk N prompt tokens run a step, over every new prompt (default %d; 0: each\n"
            "                    prompt whole): the streams decoding meanwhile wait for one chunk a step\n"
            "  --timeout S       close a connection idle for S seconds (default 30): a slow or stalled\n"
            "                    client does not hold its thread\n"
            "  --api-key KEY     require 'Authorization: Bearer KEY' (also $VKG_API_KEY)\n"
            "  --threads N       CPU executor threads (default: every core)\n"
            "  --device D        cpu, vulkan or vulkan:N (default: the best Vulkan GPU, else the CPU)\n",
            batch.prefill_chunk);
}

static int load_model(const char *dir, vkg_device *dev, vkg_model **m, int *n_ctx_model) {
    vkg_error err = {0};
    vkg_model_info info;
    if (vkg_model_open(dir, dev, NULL, m, &err) != VKG_OK || vkg_model_get_info(*m, &info, &err) != VKG_OK)
        return cli_fail(CMD, "%s", err.message);
    if (info.random_weights)
        fprintf(stderr, "vkgraph %s: note: %s holds RANDOM weights (written by vkgraph random or gpt2-random): its outputs "
                "mean nothing\n", CMD, dir);
    char fallback[PATH_MAX];
    if (!vkg_model_tokenizer(*m) && info.n_vocab == 50257 && gpt2_cli_project_tokenizer(fallback, sizeof fallback)) {
        fprintf(stderr, "vkgraph %s: %s has no tokenizer files; using GPT-2's tokenizer from %s\n", CMD, dir, fallback);
        if (vkg_model_load_tokenizer(*m, fallback, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    }
    if (!vkg_model_tokenizer(*m))
        fprintf(stderr, "vkgraph %s: note: %s has no tokenizer: prompts must be token ids\n", CMD, dir);
    *n_ctx_model = info.n_ctx;
    return 0;
}

static const char *base_name(const char *dir) {
    static char name[256];
    snprintf(name, sizeof name, "%s", dir);
    size_t n = strlen(name);
    while (n > 1 && name[n - 1] == '/') name[--n] = 0;
    const char *slash = strrchr(name, '/');
    return slash && slash[1] ? slash + 1 : name;
}

int cmd_serve(int argc, char **argv) {
    srv_options o;
    srv_options_default(&o);
    const char *model_dir = NULL, *device = NULL;
    long port = 8080, parallel = 1, queue = 64, ctx_size = 0, threads = 0, timeout = 30, chunk = o.prefill_chunk;
    o.api_key = getenv("VKG_API_KEY");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
#define VALUE() \
    if (!(v = cli_value(CMD, argc, argv, &i))) return 1
        if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) {
            VALUE();
            model_dir = v;
        } else if (strcmp(a, "--host") == 0) {
            VALUE();
            o.host = v;
        } else if (strcmp(a, "--port") == 0) {
            VALUE();
            if (cli_int(CMD, a, v, 0, 65535, &port)) return 1;
        } else if (strcmp(a, "--parallel") == 0 || strcmp(a, "-np") == 0) {
            VALUE();
            if (cli_int(CMD, a, v, 1, 256, &parallel)) return 1;
        } else if (strcmp(a, "--queue") == 0) {
            VALUE();
            if (cli_int(CMD, a, v, 0, 100000, &queue)) return 1;
        } else if (strcmp(a, "--ctx-size") == 0 || strcmp(a, "-c") == 0) {
            VALUE();
            if (cli_int(CMD, a, v, 1, 1L << 30, &ctx_size)) return 1;
        } else if (strcmp(a, "--prefill-chunk") == 0) {
            VALUE();
            if (cli_int(CMD, a, v, 0, 1L << 30, &chunk)) return 1;
        } else if (strcmp(a, "--timeout") == 0) {
            VALUE();
            if (cli_int(CMD, a, v, 1, 86400, &timeout)) return 1;
        } else if (strcmp(a, "--api-key") == 0) {
            VALUE();
            o.api_key = v;
        } else if (strcmp(a, "--threads") == 0) {
            VALUE();
            if (cli_int(CMD, a, v, 0, 1024, &threads)) return 1;
        } else if (strcmp(a, "--device") == 0) {
            VALUE();
            device = v;
        } else {
            return cli_unknown_option(CMD, a, usage);
        }
    }
    if (!model_dir) return cli_fail(CMD, "say which model: -m DIR (see vkgraph serve --help)");
    if (o.api_key && !o.api_key[0]) o.api_key = NULL;
    o.port = (int)port;
    o.parallel = (int)parallel;
    o.max_queue = (int)queue;
    o.ctx_size = (int)ctx_size;
    o.prefill_chunk = (int)chunk;
    o.timeout_s = (unsigned)timeout;
    o.model_name = base_name(model_dir);
    o.model_dir = model_dir;

    /* Every thread started from here inherits the blocked signals; the main thread takes them
     * with sigwait, so a signal never interrupts a slot or a connection. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    vkg_error err = {0};
    srv *s = NULL;
    if (srv_start(&o, &s, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    fprintf(stderr, "vkgraph %s: listening on http://%s:%d (loading %s)\n", CMD, o.host, srv_port(s), model_dir);
    vkg_device *dev = NULL;
    vkg_model *m = NULL;
    int n_ctx_model = 0, rc = 0;
    vkg_status st = VKG_OK;
    if (cli_open_device(CMD, device, (int)threads, &dev) || cli_check_threads(CMD, threads, dev) ||
        load_model(model_dir, dev, &m, &n_ctx_model))
        rc = 1;
    else if (ctx_size > n_ctx_model)
        rc = cli_fail(CMD, "--ctx-size %ld is more than the model's context of %d positions", ctx_size, n_ctx_model);
    else if ((st = srv_set_model(s, m, &err)) != VKG_OK)
        rc = cli_fail(CMD, "%s%s", err.message,
                      cli_memory_hint(st, " (--ctx-size N sets shorter KV caches; --parallel N fewer of them)"));
    if (rc == 0) {
        cli_note_context(CMD, (int)ctx_size, srv_n_ctx(s), n_ctx_model, "--ctx-size N sets it", dev);
        fprintf(stderr, "vkgraph %s: ready: %ld slot%s of %d positions on %s\n", CMD, parallel, parallel == 1 ? "" : "s",
                srv_n_ctx(s), vkg_device_name(dev));
        const char *no_chat = srv_chat_unavailable(s);
        if (no_chat) fprintf(stderr, "vkgraph %s: note: /v1/chat/completions answers 400: %s\n", CMD, no_chat);
        int sig = 0;
        sigwait(&stop_signals, &sig);
        fprintf(stderr, "vkgraph %s: %s: stopping\n", CMD, sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    srv_stop(s);
    vkg_model_free(m);
    if (dev) cli_close_device(CMD, dev);
    return rc;
}
