/* The KV cache of a context whose caller leaves its size to the model (n_ctx 0): the model's
 * whole context where the device can bind and hold it, else the largest half, quarter, ... of it
 * that it can.  Llama 3.2 is trained for 131072 positions: a cache of that length is 512 MiB a
 * layer, more than many devices bind at once (lavapipe 128 MiB, many GPUs 1 GiB or less), and
 * 8 GiB for its 16 layers, more than many hold; refusing to open it would leave every user to
 * find --ctx by trial. */
#ifndef VKG_MODELS_CONTEXT_FIT_H
#define VKG_MODELS_CONTEXT_FIT_H

#include "vkgraph.h"

/* The fewest positions halving goes down to before it gives up. */
#define VKG_FIT_MIN_CTX 256

/* Makes the context with a cache of n_ctx positions; VKG_OK or the reason it failed. */
typedef vkg_status (*vkg_fit_make)(void *arg, int n_ctx, vkg_error *err);

/* make(arg, model_ctx); while that fails on a device limit (VKG_ERR_UNSUPPORTED: an operand past
 * the largest binding, a loop too long for the device) or on memory (VKG_ERR_OUT_OF_DEVICE_MEMORY,
 * VKG_ERR_OUT_OF_MEMORY) and the cache holds more than VKG_FIT_MIN_CTX and `least` positions (the
 * longest feed the context is made for), make(arg, half of it).  Any other failure at once; the
 * last failure's message, naming the sizes tried, when none fits. */
vkg_status vkg_fit_context(int model_ctx, int least, vkg_fit_make make, void *arg, vkg_error *err);

#endif
