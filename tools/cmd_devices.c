/* vkgraph devices: lists every Vulkan device with the limits and features that matter here. */
#include "commands.h"
#include "vkgraph.h"

#include <stdio.h>
#include <string.h>

int cmd_devices(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: vkgraph devices\n\n"
                   "Lists every Vulkan device in the order vulkan:N counts them, with its type, driver,\n"
                   "API version, subgroup size, shared memory, buffer limits, memory heaps and features.\n"
                   "The device marked (default) is the one --device vulkan picks.\n");
            return 0;
        }
        fprintf(stderr, "vkgraph devices: unknown option '%s' (try --help)\n", argv[i]);
        return 1;
    }
    vkg_error err = {0};
    if (vkg_devices_print(stdout, &err) != VKG_OK) {
        fprintf(stderr, "vkgraph devices: %s\n", err.message);
        if (err.status == VKG_ERR_NO_DEVICE)
            fprintf(stderr, "vkgraph can still run every model on the CPU (--device cpu).\n");
        return 1;
    }
    return 0;
}
