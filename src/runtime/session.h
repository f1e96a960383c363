/* A session as the library sees it: the device, the plan, and the backend's half (core/backend.h).
 * session.c implements the public session calls over it, compare.c the step-by-step comparison. */
#ifndef VKG_CORE_SESSION_H
#define VKG_CORE_SESSION_H

#include "runtime/backend.h"

/* A slot of the plan's indices region as the session holds it: the index node there (VKG_NONE
 * where no step reads one) and the value last set, which the session checks against the node's
 * range (vkg_placement's index_min .. index_max) before every run. */
typedef struct vkg_session_index {
    vkg_tensor node;
    int32_t value;
} vkg_session_index;

struct vkg_session {
    vkg_device *device;
    const vkg_plan *plan;
    void *impl;
    char label[64];        /* vkg_session_set_label: names its track in the trace               */
    int profile_id;        /* 0: not profiling; else this session's number in the device profile */
    vkg_step_times times;  /* per-step times of the run in progress, when profiling              */
    vkg_session_index *indices; /* one per slot of the indices region (NULL: the plan has none) */
    int n_indices;
};

/* Checks that each of s's runtime indices holds a value its uses take: a run is refused
 * otherwise, on every executor. */
vkg_status vkg_session_check_indices(const vkg_session *s, vkg_error *err);

#endif
