/* A device's profile: what every profiled session computes, one span per run and per step of
 * every profiled run, and the spans that vkg_device_profile_mark opens, kept until the device is
 * freed.  Every time is the host's CLOCK_MONOTONIC in nanoseconds: the executors map their own
 * clocks onto it (vkg_step_times), so spans of all sessions and marks share one time line.
 * profile.c records, profile_print.c prints the table and its summaries, profile_trace.c writes
 * the Chrome trace. */
#ifndef VKG_PROFILE_H
#define VKG_PROFILE_H

#include "base/clock.h"
#include "graph/plan.h"

/* What an executor's run reports when timed: for every step its begin and end on the host clock. */
typedef struct vkg_step_times {
    uint64_t *begin_ns, *end_ns;   /* n_steps each, filled by the executor                       */
    const char *clock;             /* how they were taken: a static string, set by the executor  */
} vkg_step_times;

/* What one step of a profiled session computes, copied so that it outlives the session. */
typedef struct vkg_profile_step {
    char label[48];                /* the kernel with what was fused: "matmul+bias+gelu"          */
    char node[64];                 /* vkg_tensor_name of the step's node: "h.3.attn.softmax"      */
    char shape[40];
} vkg_profile_step;

typedef struct vkg_profile_session {
    char label[64];                /* vkg_session_set_label: "decode", "prefill (T=27)"; or ""    */
    int n_steps;
    vkg_profile_step *steps;
} vkg_profile_session;

/* A step of a run (step >= 0), a whole run (step == -1), or a mark (session == 0). */
typedef struct vkg_profile_event {
    int session;                   /* 1-based index into vkg_profile.sessions; 0 for a mark        */
    int step;                      /* a mark: its index in vkg_profile.marks                      */
    uint64_t begin_ns, end_ns;
} vkg_profile_event;

typedef struct vkg_profile_mark {
    char name[48];
    uint64_t begin_ns, end_ns;     /* end_ns == 0 while it is open                                */
} vkg_profile_mark;

typedef struct vkg_profile {
    vkg_profile_event *events;
    size_t n, cap;
    size_t dropped;                /* events past the cap, counted but not kept                   */
    vkg_profile_session *sessions;
    int n_sessions;
    vkg_profile_mark *marks;
    int n_marks;
    const char *clock;             /* the executor's note on how step times were taken            */
} vkg_profile;

/* Registers a session of plan p; *id receives its 1-based number. */
vkg_status vkg_profile_add_session(vkg_profile *prof, const vkg_plan *p, const char *label, int *id,
                                   vkg_error *err);
void vkg_profile_set_label(vkg_profile *prof, int id, const char *label);
/* Appends one run of session id that the host saw from begin_ns to end_ns.  Step times are
 * clamped into that window, so that every step lies inside its run whatever the calibration. */
void vkg_profile_add_run(vkg_profile *prof, int id, uint64_t begin_ns, uint64_t end_ns, const vkg_step_times *t);
void vkg_profile_free(vkg_profile *prof);

#endif
