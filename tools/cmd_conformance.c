/* vkgraph conformance: runs every op and fused kernel on a device and on the CPU reference, and
 * prints a pass/fail table: the way to check a new GPU or driver. */
#include "cli.h"
#include "commands.h"
#include "vkgraph_conformance.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph conformance [--device D] [--quick|--full] [--op NAME] [--seed N] [--threads N]\n"
            "                           [--verbose]\n\n"
            "Runs every op and fused kernel over a sweep of shapes on the CPU executor (the reference)\n"
            "and on device D (default: the best Vulkan device), and compares the outputs by normalized\n"
            "mean squared error against a threshold per op, and by where infinities and NaNs appear.\n"
            "Exits 1 when a case fails, or when the Vulkan validation layer reported anything\n"
            "(run with VKG_VALIDATION=1 to enable it).  A device's first run compiles every pipeline\n"
            "(seconds each on a software rasteriser; the driver caches them on disk for later runs).\n"
            "VKG_MATMUL=tiled or texel chooses the Vulkan matmul shaders, to check both.\n\n"
            "  --device D    vulkan, vulkan:N (see vkgraph devices), or cpu: the CPU executor with\n"
            "                --threads threads against itself on one thread\n"
            "  --quick       small shapes only (seconds)\n"
            "  --full        add GPT-2 at T = 1024, GPT-2 XL's long prompts, the logits beyond T = 64,\n"
            "                a whole GPT-2 124M (random weights) at T = 1024 and its batched decode\n"
            "                step of 8 sequences, and the Llama family's ops at T = 2048 (SmolLM2,\n"
            "                Qwen2.5, TinyLlama, Llama 3.2, Mistral heads)\n"
            "  --op NAME     only this op:");
    for (int i = 0; i < vkg_conformance_op_count(); i++) fprintf(f, " %s", vkg_conformance_op_name(i));
    fprintf(f, "\n"
               "  --seed N      seed of the random inputs\n"
               "  --threads N   threads of the CPU reference (default: every core)\n"
               "  --verbose     a line per case as it runs, then the table\n");
}

int cmd_conformance(int argc, char **argv) {
    const char *spec = "vulkan";
    long threads = 0, seed = -1;
    int verbose = 0;
    const char *level = NULL; /* --quick or --full, as given */
    vkg_conformance_options o;
    vkg_conformance_options_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--device")) {
            if (!(spec = cli_value("conformance", argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--op")) {
            if (!(o.op = cli_value("conformance", argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--quick") || !strcmp(a, "--full")) {
            if (level && strcmp(level, a))
                return cli_fail("conformance", "%s and %s contradict each other: give one", level, a);
            level = a;
            o.level = !strcmp(a, "--quick") ? VKG_CONFORMANCE_QUICK : VKG_CONFORMANCE_FULL;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            verbose = 1;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "--seed")) {
            const char *v = cli_value("conformance", argc, argv, &i);
            int is_threads = !strcmp(a, "--threads");
            if (!v || cli_int("conformance", a, v, 0, is_threads ? 1024 : 2147483647L, is_threads ? &threads : &seed))
                return 1;
        } else {
            return cli_unknown_option("conformance", a, usage);
        }
    }
    if (seed >= 0) o.seed = (uint64_t)seed;
    if (o.op) {
        const char *names[256];
        int n = vkg_conformance_op_count() < 256 ? vkg_conformance_op_count() : 256, known = 0;
        for (int i = 0; i < n; i++) known |= !strcmp(o.op, names[i] = vkg_conformance_op_name(i));
        if (!known) return cli_unknown_value("conformance", "--op", o.op, names, n);
    }

    vkg_device *ref = NULL, *dut = NULL;
    /* Checking the CPU against itself: one thread is the reference, so the split of the work
     * over threads is what is tested. */
    vkg_device_options dopts = {.cpu_threads = strcmp(spec, "cpu") ? (int)threads : 1, .quiet = 1};
    vkg_error err = {0};
    /* The device first: it reads the environment, VKG_MAX_CPU_ISA included, which the reference's
     * kernels follow too. */
    if (cli_open_device("conformance", spec, (int)threads, &dut)) {
        if (!strncmp(spec, "vulkan", 6))
            fprintf(stderr, "vkgraph conformance: no Vulkan device to test; nothing was checked "
                            "(--device cpu checks the CPU executor against itself)\n");
        return 1;
    }
    if (vkg_device_open("cpu", &dopts, &ref, &err) != VKG_OK) {
        vkg_device_free(dut);
        return cli_fail("conformance", "cannot open the CPU reference: %s", err.message);
    }
    if (verbose) {
        printf("reference %s, device under test %s\n", vkg_device_name(ref), vkg_device_name(dut));
        o.progress = stdout;
    }

    vkg_conformance_report r = {0};
    int rc = 1;
    if (vkg_conformance_run(ref, dut, &o, &r, &err) != VKG_OK) {
        cli_fail("conformance", "%s", err.message);
    } else {
        if (verbose) printf("\n");
        vkg_conformance_report_print(&r, stdout, 0);
        uint64_t messages = vkg_device_validation_errors(dut) + vkg_device_validation_errors(ref);
        if (messages)
            printf("%" PRIu64 " Vulkan validation message%s reported (see stderr): FAIL\n", messages,
                   messages == 1 ? "" : "s");
        rc = r.failed || messages ? 1 : 0;
    }
    vkg_conformance_report_free(&r);
    cli_close_device("conformance", dut);
    cli_close_device("conformance", ref);
    return rc;
}
