/* vkgraph devices: lists every Vulkan device with the limits and features that matter here, or
 * the one --device names. */
#include "cli.h"
#include "commands.h"
#include "vkgraph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "devices"

static void usage(FILE *f) {
    fprintf(f, "usage: vkgraph devices [--device cpu|vulkan|vulkan:N]\n\n"
               "Lists every Vulkan device in the order vulkan:N counts them, with its type, driver,\n"
               "API version, subgroup size, shared memory, buffer limits, memory heaps and features.\n"
               "The device marked (default) is the one --device vulkan picks.\n\n"
               "  --device D    show only D: vulkan:N, vulkan (the default Vulkan device) or cpu (the CPU\n"
               "                executor, which every command can use instead of a GPU)\n"
               "  -h, --help    show this help\n");
}

static int print_cpu(void) {
    vkg_device *dev = NULL;
    if (cli_open_device(CMD, "cpu", 0, &dev)) return 1;
    printf("cpu  %s\n    %-34s %s\n", vkg_device_name(dev), "type", "vkgraph's CPU executor (plain C kernels, the "
           "reference for conformance)");
    vkg_device_free(dev);
    return 0;
}

int cmd_devices(int argc, char **argv) {
    const char *spec = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--device") != 0) return cli_unknown_option(CMD, argv[i], usage);
        if (spec) return cli_fail(CMD, "--device given twice");
        if (!(spec = cli_value(CMD, argc, argv, &i))) return 1;
    }
    if (spec && strcmp(spec, "cpu") == 0) return print_cpu();
    int index = -2; /* every device */
    if (spec && strcmp(spec, "vulkan") == 0) {
        index = -1;
    } else if (spec) {
        long n = -1;
        const char *num = strncmp(spec, "vulkan:", 7) == 0 ? spec + 7 : NULL;
        char *end = NULL;
        if (num && *num >= '0' && *num <= '9') n = strtol(num, &end, 10);
        if (n < 0 || n > 1000 || *end)
            return cli_fail(CMD, "--device '%s': expected cpu, vulkan or vulkan:N with N a device number", spec);
        index = (int)n;
    }
    vkg_error err = {0};
    vkg_status st = index == -2 ? vkg_devices_print(stdout, &err) : vkg_devices_print_one(stdout, index, &err);
    if (st != VKG_OK) {
        cli_fail(CMD, "%s", err.message);
        if (err.status == VKG_ERR_NO_DEVICE && index == -2)
            fprintf(stderr, "vkgraph can still run every model on the CPU (--device cpu).\n");
        return 1;
    }
    return 0;
}
