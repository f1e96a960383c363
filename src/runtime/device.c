/* Opening a device by name: "cpu", "vulkan", "vulkan:N", or NULL/"auto" for the best one: a
 * Vulkan GPU, else the CPU executor.  A software Vulkan device (lavapipe, Mesa's rasteriser on
 * the CPU) is opened only by name: on the machines measured the CPU executor runs the same
 * models several times faster (docs/PERFORMANCE.md: SmolLM2-135M decodes a token in 7 ms there
 * against 32 to 44 on lavapipe), and "auto" should be the fastest choice, not the most exotic. */
#include "runtime/backend.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vkg_status open_vulkan_spec(vkg_device *d, const char *spec, vkg_error *err) {
    if (strcmp(spec, "vulkan") == 0) return vkg_vulkan_device_open(d, -1, err);
    const char *num = spec + strlen("vulkan:");
    char *end = NULL;
    long index = strtol(num, &end, 10);
    if (*num == '\0' || *end != '\0' || index < 0 || index > 1000)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "device '%s': expected cpu, vulkan or vulkan:N with N a device number", spec);
    return vkg_vulkan_device_open(d, (int)index, err);
}

vkg_status vkg_device_open(const char *spec, const vkg_device_options *opts, vkg_device **out,
                           vkg_error *err) {
    *out = NULL;
    vkg_device *d = calloc(1, sizeof *d);
    if (!d) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory opening a device");
    if (opts) d->opts = *opts;

    vkg_status st;
    if (!spec || strcmp(spec, "auto") == 0) {
        vkg_error verr;
        st = vkg_vulkan_device_open(d, -1, &verr);
        if (st == VKG_OK && d->software) { /* the expected choice without a GPU: no note */
            const vkg_device_options o = d->opts;
            d->ops->device_free(d->impl);
            memset(d, 0, sizeof *d);
            d->opts = o;
            st = vkg_cpu_device_open(d, err);
        } else if (st != VKG_OK) {
            if (!d->opts.quiet)
                fprintf(stderr, "vkgraph: no usable Vulkan device (%s); running on the CPU\n", verr.message);
            st = vkg_cpu_device_open(d, err);
        }
    } else if (strcmp(spec, "cpu") == 0) {
        st = vkg_cpu_device_open(d, err);
    } else if (strncmp(spec, "vulkan", 6) == 0 && (spec[6] == '\0' || spec[6] == ':')) {
        st = open_vulkan_spec(d, spec, err);
    } else {
        st = vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                           "unknown device '%s': expected cpu, vulkan or vulkan:N", spec);
    }
    if (st != VKG_OK) {
        free(d);
        return st;
    }
    *out = d;
    return VKG_OK;
}

void vkg_device_free(vkg_device *d) {
    if (!d) return;
    if (d->ops && d->ops->device_free) d->ops->device_free(d->impl);
    vkg_profile_free(&d->profile);
    free(d);
}

int vkg_device_has_abandoned_work(const vkg_device *d) {
    return d && d->ops && d->ops->has_abandoned_work && d->ops->has_abandoned_work(d->impl);
}

const char *vkg_device_name(const vkg_device *d) { return d->name; }
int vkg_device_is_cpu(const vkg_device *d) { return strcmp(d->ops->name, "cpu") == 0; }
int vkg_device_is_software(const vkg_device *d) { return d->software; }
uint64_t vkg_device_validation_errors(const vkg_device *d) { return d->validation_errors; }
int vkg_device_prefers_transposed_weights(const vkg_device *d) { return d && d->transposed_weights; }

void vkg_device_compile_options(const vkg_device *d, vkg_compile_options *opts) {
    if (d->alignment > opts->alignment) opts->alignment = d->alignment;
    if (d->max_binding_bytes && d->max_binding_bytes < opts->max_binding_bytes)
        opts->max_binding_bytes = d->max_binding_bytes;
    if (!d->read_16bit) opts->read_16bit = 0;
}

uint64_t vkg_device_peak_memory_bytes(const vkg_device *d) { return d ? d->device_memory.peak_bytes : 0; }
