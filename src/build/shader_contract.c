/* A build step: every shader's interface, as its compiled SPIR-V declares it (spirv-cross
 * --reflect, one JSON file per shader), against the row of src/graph/kernels.def it is built for.
 * The table is read through its X-macros, so a new family or shader is checked without a line
 * here.  For each VKG_SHADER row:
 *   - the push-constant block is as long as the family's parameter block (sizeof
 *     vkg_<name>_params, the C side of shaders/params/<name>.h);
 *   - every binding is in set 0 at a slot below the family's n_bindings, declared once;
 *   - a slot of texel_mask is a uniform texel buffer, READ: of uints (usamplerBuffer) for the
 *     WEIGHT binding of a 16-bit variant (whose b16 names itself), else of floats; any other slot
 *     is a storage buffer, read-only where the table says READ and writable where it says WRITE,
 *     of 32-bit elements (F32 and I32 words; WEIGHT too, or 16-bit ones in a 16-bit variant);
 *   - every specialization constant is a row of shaders/params/spec_constants.def with the row's
 *     constant_id and type (SPIR-V leaves the workgroup size's unnamed: those must be the ids of
 *     WG_X and WG_Y); and every row of that table is declared by some shader.
 * Usage: shader_contract JSON_DIR.  Prints each disagreement naming both sides and exits 1;
 * exits 0 when every shader agrees. */
#include "base/json.h"
#include "graph/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { READ, WRITE };
enum { F32, I32, WEIGHT };

typedef struct binding {
    const char *name;
    int access, elem;
} binding;

typedef struct family {
    const char *id, *name;
    int n_bindings;
    const binding *bindings;
    size_t params_bytes;
} family;

typedef struct shader {
    const char *id, *file, *family, *b16;
    unsigned texel_mask, texel_vec4;
} shader;

#define VKG_BIND(name, access, elem) {#name, access, elem}
#define VKG_KERNEL(ENUM, name, n_bindings, units, cost, ...) static const binding bindings_##ENUM[] = {__VA_ARGS__};
#include "graph/kernels.def"
#undef VKG_BIND

static const family families[] = {
#define VKG_KERNEL(ENUM, name, n_bindings, units, cost, ...) \
    {#ENUM, #name, n_bindings, bindings_##ENUM, sizeof(vkg_##name##_params)},
#include "graph/kernels.def"
};

static const shader shaders[] = {
#define VKG_SHADER(SHADER, file, ENUM, texel_mask, texel_vec4, b16) {#SHADER, #file, #ENUM, #b16, texel_mask, texel_vec4},
#include "graph/kernels.def"
};

typedef struct spec_row {
    const char *name, *type;
    int id, declared;
} spec_row;

static spec_row spec_rows[] = {
#define VKG_SPEC(NAME, id, type) {#NAME, #type, id, 0},
#include "params/spec_constants.def"
};
#define N_SPEC_ROWS (sizeof spec_rows / sizeof spec_rows[0])

static int failures;

static void fail(const shader *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const shader *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "shaders/%s.comp (its SPIR-V) against src/graph/kernels.def (VKG_SHADER %s): ", s->file, s->id);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

static const char *str(const vkg_json *o, const char *key) {
    const char *v = vkg_json_string(vkg_json_get(o, key), NULL);
    return v ? v : "";
}

/* The byte length of a block type of the reflection: the end of its last member. */
static long block_bytes(const vkg_json *types, const char *type) {
    const vkg_json *members = vkg_json_get(vkg_json_get(types, type), "members");
    long end = 0;
    for (size_t i = 0; i < vkg_json_length(members); i++) {
        const vkg_json *m = vkg_json_at(members, i);
        const char *t = str(m, "type");
        long bytes = !strcmp(t, "float") || !strcmp(t, "uint") || !strcmp(t, "int") ? 4 : -1;
        if (bytes < 0) bytes = block_bytes(types, t); /* a struct member */
        const vkg_json *array = vkg_json_get(m, "array");
        for (size_t k = 0; k < vkg_json_length(array); k++)
            bytes = (long)vkg_json_number(vkg_json_get(m, "array_stride")) * (long)vkg_json_number(vkg_json_at(array, k));
        const long e = (long)vkg_json_number(vkg_json_get(m, "offset")) + bytes;
        end = e > end ? e : end;
    }
    return end;
}

/* The element type of a storage buffer's first member (the runtime array every shader uses). */
static const char *element(const vkg_json *types, const char *type) {
    return str(vkg_json_at(vkg_json_get(vkg_json_get(types, type), "members"), 0), "type");
}

static int bits_of(const char *t) {
    if (!strcmp(t, "float") || !strcmp(t, "uint") || !strcmp(t, "int") || !strcmp(t, "vec4") || !strcmp(t, "uvec4"))
        return 32;
    if (!strcmp(t, "float16_t") || !strcmp(t, "uint16_t") || !strcmp(t, "int16_t") || !strcmp(t, "f16vec4"))
        return 16;
    return 0;
}

static void check(const shader *s, const family *f, const vkg_json *r) {
    const vkg_json *types = vkg_json_get(r, "types");
    const vkg_json *push = vkg_json_at(vkg_json_get(r, "push_constants"), 0);
    const long push_bytes = push ? block_bytes(types, str(push, "type")) : 0;
    if (push_bytes != (long)f->params_bytes)
        fail(s, "a push-constant block of %ld bytes, but family %s's parameters, vkg_%s_params, are %zu bytes",
             push_bytes, f->id, f->name, f->params_bytes);

    int seen[32] = {0};
    const char *kinds[2] = {"ssbos", "textures"};
    for (int k = 0; k < 2; k++) {
        const vkg_json *list = vkg_json_get(r, kinds[k]);
        for (size_t i = 0; i < vkg_json_length(list); i++) {
            const vkg_json *b = vkg_json_at(list, i);
            const int slot = (int)vkg_json_number(vkg_json_get(b, "binding"));
            const char *name = str(b, "name");
            if (vkg_json_number(vkg_json_get(b, "set")) != 0 || slot < 0 || slot >= f->n_bindings) {
                fail(s, "'%s' at set %g binding %d, but family %s has bindings 0 to %d of set 0", name,
                     vkg_json_number(vkg_json_get(b, "set")), slot, f->id, f->n_bindings - 1);
                continue;
            }
            if (seen[slot]++) fail(s, "binding %d declared twice ('%s')", slot, name);
            const binding *want = &f->bindings[slot];
            const int texel = (s->texel_mask >> slot) & 1u;
            /* 16-bit elements: the WEIGHT binding of a 16-bit variant (vulkan/record.c's formats) */
            const int b16 = want->elem == WEIGHT && !strcmp(s->b16, s->id);
            const char *table_kind = texel ? (b16 ? "a uniform texel buffer of uints (usamplerBuffer)"
                                                  : "a uniform texel buffer of floats (samplerBuffer)")
                                           : "a storage buffer";
            if (k == 1) { /* a texel buffer */
                if (!texel || strcmp(str(b, "type"), b16 ? "usamplerBuffer" : "samplerBuffer") || want->access != READ)
                    fail(s, "binding %d '%s' is a %s, but %s binding %d '%s' is %s%s (texel_mask 0x%x)", slot, name,
                         str(b, "type"), f->id, slot, want->name, table_kind, want->access == READ ? "" : ", written",
                         s->texel_mask);
                continue;
            }
            const int readonly = vkg_json_bool(vkg_json_get(b, "readonly"));
            const char *elem = element(types, str(b, "type"));
            const int bits = bits_of(elem), want_bits = b16 ? 16 : 32;
            if (texel || readonly != (want->access == READ) || bits != want_bits)
                fail(s, "binding %d '%s' is a %s storage buffer of %s, but %s binding %d '%s' is %s, %s, of %d-bit elements",
                     slot, name, readonly ? "read-only" : "writable", elem, f->id, slot, want->name, table_kind,
                     want->access == READ ? "READ" : "WRITE", want_bits);
        }
    }
}

/* The row of that name, or for an unnamed constant (the workgroup size) the row WG_X or WG_Y of
 * its id. */
static spec_row *spec_row_of(const char *name, int id) {
    for (size_t i = 0; i < N_SPEC_ROWS; i++) {
        spec_row *row = &spec_rows[i];
        if (*name ? !strcmp(row->name, name) : (!strncmp(row->name, "WG_", 3) && row->id == id)) return row;
    }
    return NULL;
}

static void check_spec(const shader *s, const vkg_json *r) {
    const vkg_json *list = vkg_json_get(r, "specialization_constants");
    for (size_t i = 0; i < vkg_json_length(list); i++) {
        const vkg_json *c = vkg_json_at(list, i);
        const char *name = str(c, "name"), *type = str(c, "type");
        const int id = (int)vkg_json_number(vkg_json_get(c, "id"));
        spec_row *row = spec_row_of(name, id);
        if (!row) {
            fail(s, "specialization constant %s (constant_id %d, %s) has no row in shaders/params/spec_constants.def",
                 *name ? name : "(unnamed, and not the workgroup size's)", id, type);
            continue;
        }
        row->declared = 1;
        if (row->id != id || strcmp(row->type, type))
            fail(s, "specialization constant %s is constant_id %d of type %s, but shaders/params/spec_constants.def "
                 "has VKG_SPEC(%s, %d, %s)", *name ? name : row->name, id, type, row->name, row->id, row->type);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: shader_contract JSON_DIR\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof shaders / sizeof shaders[0]; i++) {
        const shader *s = &shaders[i];
        const family *f = NULL;
        for (size_t k = 0; k < sizeof families / sizeof families[0]; k++)
            if (!strcmp(families[k].id, s->family)) f = &families[k];
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.json", argv[1], s->file);
        vkg_json *r = NULL;
        vkg_error err;
        if (!f) {
            fail(s, "family %s has no VKG_KERNEL row", s->family);
        } else if (vkg_json_parse_file(path, &r, &err) != VKG_OK) {
            fail(s, "no reflection: %s", err.message);
        } else {
            check(s, f, r);
            check_spec(s, r);
            vkg_json_free(r);
        }
    }
    /* a VKG_SOURCE row (whose GLSL CMakeLists.txt writes) of a file no VKG_SHADER row compiles */
    static const char *const sources[] = {
#define VKG_SOURCE(file, params, defines, bodies) #file,
#include "graph/kernels.def"
    };
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        size_t k = 0;
        while (k < sizeof shaders / sizeof shaders[0] && strcmp(shaders[k].file, sources[i])) k++;
        if (k == sizeof shaders / sizeof shaders[0]) {
            fprintf(stderr, "src/graph/kernels.def: VKG_SOURCE(%s, ...) names a file no VKG_SHADER row has\n",
                    sources[i]);
            failures++;
        }
    }
    for (size_t i = 0; i < N_SPEC_ROWS; i++)
        if (!spec_rows[i].declared) {
            fprintf(stderr, "shaders/params/spec_constants.def: VKG_SPEC(%s, %d, %s) is declared by no shader "
                    "(src/graph/kernels.def's VKG_SHADER rows)\n", spec_rows[i].name, spec_rows[i].id, spec_rows[i].type);
            failures++;
        }
    if (failures) fprintf(stderr, "shader_contract: %d disagreement(s) between the shaders and src/graph/kernels.def\n", failures);
    return failures ? 1 : 0;
}
