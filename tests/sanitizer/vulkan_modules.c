/* Sanitizer builds only (VKG_SANITIZE=ON): linked into every test program and into the vkgraph
 * tool, so that LeakSanitizer tells the Vulkan driver's own leaks apart from vkgraph's.
 *
 * The Vulkan loader unloads every driver (ICD) and layer at vkDestroyInstance.  What such a
 * library allocated and still holds in its own globals then looks leaked, and the allocation's
 * stack points into memory that is no longer mapped: LeakSanitizer prints "<unknown module>",
 * which no suppression by name can match.  Mesa 22.3's util_cpu_detect(), for one, keeps the L3
 * cache affinity masks of AMD Zen CPUs (realloc, 128 bytes per L3 cache) in util_cpu_caps for
 * the life of libvulkan_lvp.so, and never frees them.
 *
 * So, before main(), every library the loader could load as a driver or layer is opened once
 * more, with RTLD_NODELETE, and stays mapped until the process ends: the library_path of every
 * ICD manifest the loader reads (VK_DRIVER_FILES, VK_ICD_FILENAMES and VK_ADD_DRIVER_FILES
 * included), of every implicit layer, and of the Khronos validation layer.  What their globals
 * hold then stays reachable, and their frames keep their module names.  A leak whose stack runs
 * through one of them is suppressed by that library's file name, and by nothing else: never
 * "<unknown module>", never a name that could match vkgraph's own frames.  vkgraph's own leaks
 * are still reported; a Vulkan object that vkgraph forgets to destroy (whose memory the driver
 * allocated) is reported by the validation layer's object tracker instead, and every Vulkan test
 * asserts that the layer reported nothing, teardown included. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

const char *__lsan_default_suppressions(void);

static char suppressions[8192];
static size_t suppressions_len;

/* Keeps path mapped and, when it loaded, suppresses leaks under its file name. */
static void pin(const char *path) {
    void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) return; /* the loader cannot load it either */
    dlclose(h);
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    if (!strstr(name, ".so") || strstr(name, "vkgraph")) return;
    char line[512];
    int n = snprintf(line, sizeof line, "leak:%s\n", name);
    if (n <= 0 || (size_t)n >= sizeof line || strstr(suppressions, line)) return;
    if (suppressions_len + (size_t)n >= sizeof suppressions) return;
    memcpy(suppressions + suppressions_len, line, (size_t)n + 1);
    suppressions_len += (size_t)n;
}

/* library_path as the loader resolves it: relative to the manifest when it holds a '/', else
 * left to dlopen's search. */
static void pin_library(const char *manifest, const vkg_json *entry) {
    const char *lib = vkg_json_string(vkg_json_get(entry, "library_path"), NULL);
    if (!lib || !*lib) return;
    if (lib[0] == '/' || !strchr(lib, '/')) {
        pin(lib);
        return;
    }
    char path[4096];
    const char *slash = strrchr(manifest, '/');
    int dir_len = slash ? (int)(slash - manifest) : 1;
    if (snprintf(path, sizeof path, "%.*s/%s", dir_len, slash ? manifest : ".", lib) < (int)sizeof path) pin(path);
}

typedef enum { DRIVERS, IMPLICIT_LAYERS, EXPLICIT_LAYERS } manifest_kind;

static void pin_layer(const char *manifest, const vkg_json *layer, manifest_kind kind) {
    const char *name = vkg_json_string(vkg_json_get(layer, "name"), NULL);
    if (kind == IMPLICIT_LAYERS || (name && strcmp(name, VALIDATION_LAYER) == 0)) pin_library(manifest, layer);
}

static void pin_manifest(const char *path, manifest_kind kind) {
    vkg_json *root = NULL;
    vkg_error err = {0};
    if (vkg_json_parse_file(path, &root, &err) != VKG_OK) return; /* the loader skips it too */
    if (kind == DRIVERS) {
        pin_library(path, vkg_json_get(root, "ICD"));
    } else {
        const vkg_json *one = vkg_json_get(root, "layer"), *many = vkg_json_get(root, "layers");
        if (one) pin_layer(path, one, kind);
        for (size_t i = 0; i < vkg_json_length(many); i++) pin_layer(path, vkg_json_at(many, i), kind);
    }
    vkg_json_free(root);
}

/* A manifest file, or every *.json in a folder. */
static void pin_path(const char *path, manifest_kind kind) {
    DIR *dir = opendir(path);
    if (!dir) {
        size_t n = strlen(path);
        if (n > 5 && strcmp(path + n - 5, ".json") == 0) pin_manifest(path, kind);
        return;
    }
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n <= 5 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        char file[4096];
        if (snprintf(file, sizeof file, "%s/%s", path, e->d_name) < (int)sizeof file) pin_manifest(file, kind);
    }
    closedir(dir);
}

/* Each entry of a ':'-separated list, with sub appended (sub may be ""). */
static void pin_list(const char *list, const char *sub, manifest_kind kind) {
    if (!list) return;
    while (*list) {
        size_t n = strcspn(list, ":");
        char path[4096];
        if (n > 0 && snprintf(path, sizeof path, "%.*s%s", (int)n, list, sub) < (int)sizeof path) pin_path(path, kind);
        list += n;
        if (*list == ':') list++;
    }
}

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* The loader's standard folders on Linux, for sub "vulkan/icd.d" or "vulkan/..._layer.d". */
static void pin_standard(const char *sub, manifest_kind kind) {
    char with_slash[64], path[4096];
    snprintf(with_slash, sizeof with_slash, "/%s", sub);
    const char *home = env("HOME");
    if (env("XDG_CONFIG_HOME")) pin_list(env("XDG_CONFIG_HOME"), with_slash, kind);
    else if (home && snprintf(path, sizeof path, "%s/.config", home) < (int)sizeof path) pin_list(path, with_slash, kind);
    pin_list(env("XDG_CONFIG_DIRS") ? env("XDG_CONFIG_DIRS") : "/etc/xdg", with_slash, kind);
    pin_list("/usr/local/etc:/etc", with_slash, kind);
    if (env("XDG_DATA_HOME")) pin_list(env("XDG_DATA_HOME"), with_slash, kind);
    else if (home && snprintf(path, sizeof path, "%s/.local/share", home) < (int)sizeof path) pin_list(path, with_slash, kind);
    pin_list(env("XDG_DATA_DIRS") ? env("XDG_DATA_DIRS") : "/usr/local/share:/usr/share", with_slash, kind);
}

__attribute__((constructor)) static void keep_vulkan_modules_mapped(void) {
    const char *drivers = env("VK_DRIVER_FILES") ? env("VK_DRIVER_FILES") : env("VK_ICD_FILENAMES");
    if (drivers) {
        pin_list(drivers, "", DRIVERS);
    } else {
        pin_standard("vulkan/icd.d", DRIVERS);
        pin_list(env("VK_ADD_DRIVER_FILES"), "", DRIVERS);
    }
    pin_standard("vulkan/implicit_layer.d", IMPLICIT_LAYERS);
    if (env("VK_LAYER_PATH")) pin_list(env("VK_LAYER_PATH"), "", EXPLICIT_LAYERS);
    else pin_standard("vulkan/explicit_layer.d", EXPLICIT_LAYERS);
    pin_list(env("VK_ADD_LAYER_PATH"), "", EXPLICIT_LAYERS);
}

/* LeakSanitizer reads this at its first leak check, at exit, long after the constructor. */
const char *__lsan_default_suppressions(void) { return suppressions; }
