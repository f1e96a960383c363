/* The KV cache of a context whose caller leaves its size to the model (n_ctx 0): the model's
 * whole context where the device can hold and run it, else the largest half, quarter, ... of it
 * that it can.  Llama 3.2 is trained for 131072 positions: 8 GiB of cache for its 16 layers, more
 * than many GPUs hold beside the weights; lavapipe's attention loop runs at most 16384 keys a row
 * reliably; and at a million positions one head's keys outgrow the 128 MiB one binding spans on
 * many devices.  Refusing to open such a model would leave every user to find --ctx by trial. */
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
