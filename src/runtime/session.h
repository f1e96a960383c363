/* A session as the library sees it: the device, the plan, and the backend's half (core/backend.h).
 * session.c implements the public session calls over it, compare.c the step-by-step comparison. */
#ifndef VKG_CORE_SESSION_H
#define VKG_CORE_SESSION_H

#include "runtime/backend.h"

struct vkg_session {
    vkg_device *device;
    const vkg_plan *plan;
    void *impl;
    char label[64];        /* vkg_session_set_label: names its track in the trace               */
    int profile_id;        /* 0: not profiling; else this session's number in the device profile */
    vkg_step_times times;  /* per-step times of the run in progress, when profiling              */
    int32_t *indices;      /* the host's copy of the indices region (one per index slot; NULL
                              where the plan has none), checked before every run            */
};

/* Checks that each of s's runtime indices holds a value its uses take (vkg_placement's index_min
 * .. index_max): a run is refused otherwise, on every executor. */
vkg_status vkg_session_check_indices(const vkg_session *s, vkg_error *err);

#endif
