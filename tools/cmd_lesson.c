/* vkgraph lesson: the lesson "Attention and Transformers" step by step, printed as the lesson
 * prints it.  Steps 1-6 need nothing but a device; step 7 looks inside GPT-2 (-m DIR). */
#include "cli.h"
#include "commands.h"
#include "vkgraph_lesson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "lesson"

static void usage(FILE *f) {
    fprintf(f, "usage: vkgraph lesson [--device D] [-m DIR] [--tokenizer DIR] [--png PATH] [STEP]\n"
               "  STEP             1-7: run one step (default: all; step 7 only with -m)\n"
               "  --device D       cpu, vulkan, vulkan:N (default: the best device)\n"
               "  -m, --model DIR  a GPT-2 folder (config.json, model.safetensors, tokenizer files) for step 7\n"
               "  --tokenizer DIR  where the tokenizer files are, when not in the model folder\n"
               "  --png PATH       step 7's heatmap image (default lesson-gpt2-layerL-headH.png for the layer\n"
               "                   and head it shows: layer 4, head 3, numbered from 0, in GPT-2 124M)\n\n");
    for (int s = 1; s <= VKG_LESSON_STEPS; s++) fprintf(f, "  step %d  %s\n", s, vkg_lesson_step_title(s));
}

/* Runs one of steps 1-6: compute on the device, then print. */
static vkg_status run_step(int step, vkg_device *dev, vkg_error *err) {
    vkg_status st = VKG_OK;
    switch (step) {
    case 1: {
        vkg_lesson_lookup r;
        if ((st = vkg_lesson_step_lookup(dev, &r, err)) == VKG_OK) vkg_lesson_print_lookup(stdout, &r);
        break;
    }
    case 2: {
        vkg_lesson_scaling r;
        if ((st = vkg_lesson_step_scaling(dev, &r, err)) == VKG_OK) vkg_lesson_print_scaling(stdout, &r);
        break;
    }
    case 3: {
        vkg_lesson_self_attention *r = malloc(sizeof *r);
        if (!r) return VKG_ERR_OUT_OF_MEMORY;
        if ((st = vkg_lesson_step_self_attention(dev, r, err)) == VKG_OK) vkg_lesson_print_self_attention(stdout, r);
        free(r);
        break;
    }
    case 4: {
        vkg_lesson_permutation r;
        if ((st = vkg_lesson_step_permutation(dev, &r, err)) == VKG_OK) vkg_lesson_print_permutation(stdout, &r);
        break;
    }
    case 5: {
        vkg_lesson_positions *r = malloc(sizeof *r);
        if (!r) return VKG_ERR_OUT_OF_MEMORY;
        if ((st = vkg_lesson_step_positions(dev, r, err)) == VKG_OK) vkg_lesson_print_positions(stdout, r);
        free(r);
        break;
    }
    case 6: {
        vkg_lesson_block *r = malloc(sizeof *r);
        if (!r) return VKG_ERR_OUT_OF_MEMORY;
        if ((st = vkg_lesson_step_block(dev, r, err)) == VKG_OK) vkg_lesson_print_block(stdout, r);
        free(r);
        break;
    }
    default:
        break;
    }
    return st;
}

int cmd_lesson(int argc, char **argv) {
    const char *device = NULL, *model = NULL, *tokenizer = NULL, *png = NULL;
    long only = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--device")) slot = &device;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) slot = &model;
        else if (!strcmp(a, "--tokenizer")) slot = &tokenizer;
        else if (!strcmp(a, "--png")) slot = &png;
        else if (a[0] != '-' && !only) {
            if (cli_int(CMD, "STEP", a, 1, VKG_LESSON_STEPS, &only)) return 1;
            continue;
        } else {
            return cli_unknown_option(CMD, a, usage);
        }
        if (!(*slot = cli_value(CMD, argc, argv, &i))) return 1;
    }
    if (png && cli_check_extension(CMD, "--png", png, ".png", "PNG")) return 1;
    if (model && (!only || only == VKG_LESSON_STEPS)) { /* step 7 writes it: checked before the model loads */
        char standard[64];
        snprintf(standard, sizeof standard, VKG_LESSON_HEATMAP_PATTERN, VKG_LESSON_GPT2_LAYER, VKG_LESSON_GPT2_HEAD);
        if (cli_check_output(CMD, "--png", png ? png : standard)) return 1;
    }
    /* Step 7's options do nothing without it: refused rather than ignored. */
    if (!model && (png || tokenizer))
        return cli_fail(CMD, "%s is for step 7, which looks inside GPT-2: give -m DIR too", png ? "--png" : "--tokenizer");
    if (model && only && only != VKG_LESSON_STEPS)
        return cli_fail(CMD, "-m DIR is for step 7; step %ld needs no model (leave -m out, or run step 7)", only);
    if (only == VKG_LESSON_STEPS && !model)
        return cli_fail(CMD, "step 7 looks inside GPT-2: give a GPT-2 folder with -m DIR "
                             "(config.json, model.safetensors, vocab.json, merges.txt)");

    vkg_device *dev = NULL;
    if (cli_open_device(CMD, device, 0, &dev)) return 1;
    int rc = 0;
    vkg_error err = {0};
    for (int step = only ? (int)only : 1; step <= (only ? (int)only : VKG_LESSON_STEPS); step++) {
        if (step == VKG_LESSON_STEPS && !model) {
            printf("\nStep 7. %s\n(skipped: step 7 needs a GPT-2 folder: vkgraph lesson -m DIR 7)\n",
                   vkg_lesson_step_title(step));
            break;
        }
        printf("%sStep %d. %s\n", step > (only ? only : 1) ? "\n" : "", step, vkg_lesson_step_title(step));
        vkg_status st = step == VKG_LESSON_STEPS ? vkg_lesson_step_gpt2(dev, model, tokenizer, png ? png : VKG_LESSON_HEATMAP_DEFAULT, stdout, &err)
                                                 : run_step(step, dev, &err);
        if (st != VKG_OK) {
            rc = cli_fail(CMD, "step %d: %s", step, err.message[0] ? err.message : vkg_status_name(st));
            break;
        }
        fflush(stdout);
    }
    cli_close_device(CMD, dev);
    return rc;
}
