/* Halving a context's cache until the device takes it (context_fit.h). */
#include "models/context_fit.h"

#include "base/error.h"

#include <stdio.h>

/* The failures a shorter cache mends: a device limit (an operand past the largest binding, a loop
 * longer than a software rasteriser runs reliably).  VKG_ERR_UNSUPPORTED also stands for what a
 * device cannot do at any length: that one fails again at each, a few compiles later.  Memory is
 * not one of them: a cache fitted to all the memory a device or host has would take it from
 * everything else, so a context too long for it is refused with the sizes, and the caller chooses. */
static int wants_room(vkg_status st) { return st == VKG_ERR_UNSUPPORTED; }

vkg_status vkg_fit_context(int model_ctx, int least, vkg_fit_make make, void *arg, vkg_error *err) {
    if (least < VKG_FIT_MIN_CTX) least = VKG_FIT_MIN_CTX;
    int n = model_ctx;
    for (;;) {
        vkg_status st = make(arg, n, err);
        if (st == VKG_OK || !wants_room(st)) return st;
        if (n <= least) {
            if (n == model_ctx || !err) return st;
            char why[sizeof err->message];
            snprintf(why, sizeof why, "%s", err->message);
            return vkg_error_set(err, st, "%s (with a KV cache of %d positions, the least tried; the model's context "
                                 "is %d)", why, n, model_ctx);
        }
        n = n / 2 > least ? n / 2 : least;
    }
}
