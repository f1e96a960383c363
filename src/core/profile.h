/* A device's profile: one event per step of every profiled run, kept until the device is freed. */
#ifndef VKG_PROFILE_H
#define VKG_PROFILE_H

#include "graph/plan.h"

typedef struct vkg_profile_event {
    int session;            /* a serial number: the n-th profiled session of the device     */
    int step;
    char label[48];
    char shape[40];
    double start_us;        /* since the first profiled run of the device                  */
    double dur_us;
} vkg_profile_event;

typedef struct vkg_profile {
    vkg_profile_event *events;
    size_t n, cap;
    size_t dropped;         /* events past the cap, counted but not kept                    */
    double origin_us;       /* the wall clock at the first profiled run                      */
    int sessions;
} vkg_profile;

/* Appends one run of plan p that started at wall-clock start_us (step_ns per step). */
void vkg_profile_add_run(vkg_profile *prof, int session, const vkg_plan *p, double start_us, const uint64_t *step_ns);
void vkg_profile_free(vkg_profile *prof);
double vkg_profile_now_us(void);

#endif
