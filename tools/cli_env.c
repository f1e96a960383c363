/* The one place where settings come from the environment: the VKG_* variables the tool honours,
 * mapped onto vkg_device_options and the CPU kernels' instruction set (vkg_cpu_set_max_isa; the
 * library itself reads none).  A flag is on when set to
 * anything but "" or "0"; a value the tool cannot read is an error, never ignored. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static int env_flag(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

int cli_device_options_from_env(const char *cmd, vkg_device_options *o) {
    o->validation = env_flag("VKG_VALIDATION");
    /* On by default with validation: VKG_SYNC_VALIDATION=0 turns it off. */
    const char *sync = getenv("VKG_SYNC_VALIDATION");
    o->no_sync_validation = sync && strcmp(sync, "0") == 0;
    const char *cache = getenv("VKG_PIPELINE_CACHE");
    o->no_pipeline_cache = cache && strcmp(cache, "0") == 0;
    o->print_steps = env_flag("VKG_VULKAN_STEPS");
    const char *import = getenv("VKG_HOST_IMPORT");
    o->no_host_import = import && strcmp(import, "0") == 0;
    const char *timeout = getenv("VKG_TIMEOUT_MS");
    if (timeout && *timeout) {
        long ms;
        if (cli_int(cmd, "VKG_TIMEOUT_MS", timeout, 1, 86400000L, &ms)) return 1;
        o->timeout_ms = (uint32_t)ms;
    }
    const char *isa = getenv("VKG_MAX_CPU_ISA");
    vkg_error err = {0};
    if (isa && *isa && vkg_cpu_set_max_isa(isa, &err) != VKG_OK)
        return cli_fail(cmd, "VKG_MAX_CPU_ISA=%s: use avx512, avx2, portable or native", isa);
    const char *mm = getenv("VKG_MATMUL");
    if (mm && *mm) {
        if (strcmp(mm, "texel") == 0) o->matmul = VKG_MATMUL_SHADERS_TEXEL;
        else if (strcmp(mm, "tiled") == 0) o->matmul = VKG_MATMUL_SHADERS_TILED;
        else return cli_fail(cmd, "VKG_MATMUL=%s: use texel or tiled (or unset it for the device's best)", mm);
    }
    return 0;
}
