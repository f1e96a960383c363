#include "base/keep.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct kept {
    const void *p;
    struct kept *next;
} kept;

static kept *kept_list;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

void vkg_keep_forever(const void *p) {
    kept *k = malloc(sizeof *k);
    if (!k) return; /* then only unlisted: still never freed */
    pthread_mutex_lock(&kept_lock);
    *k = (kept){p, kept_list};
    kept_list = k;
    pthread_mutex_unlock(&kept_lock);
}
