/* Memory kept for the rest of the process on purpose: host memory that abandoned device work may
 * still read (a Vulkan run that timed out and never finished: vulkan/vk_backend.c), and what owns
 * it.  Listed here, so that it stays reachable and a leak checker does not count it. */
#ifndef VKG_BASE_KEEP_H
#define VKG_BASE_KEEP_H

/* Adds p (not NULL) to the list; thread-safe. */
void vkg_keep_forever(const void *p);

#endif
