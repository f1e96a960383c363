/* Halving a context's cache until the device takes it (context_fit.h). */
#include "models/context_fit.h"

#include "base/error.h"

#include <stdio.h>

/* The failures a shorter cache mends: a device limit (an operand past the largest binding, a loop
 * longer than a software rasteriser runs reliably) and memory short (the session's need checked
 * against the device's heap, or the host's memory on the CPU, before anything is allocated; or
 * an allocation the driver refused).  A caller who left the length to the model chose none: a
 * chat refused at start because the model was trained for 131072 positions and the GPU holds
 * 16384 helps nobody, where one of 16384 serves every conversation that fits.  A caller who
 * names a length gets it or the reason, never less.  VKG_ERR_UNSUPPORTED also stands for what a
 * device cannot do at any length: that one fails again at each, a few compiles later. */
static int wants_room(vkg_status st) {
    return st == VKG_ERR_UNSUPPORTED || st == VKG_ERR_OUT_OF_DEVICE_MEMORY || st == VKG_ERR_OUT_OF_MEMORY;
}

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
