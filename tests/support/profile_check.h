/* Reading what profiling prints and writes.  trace_check reads a Chrome trace that vkg_device_profile_write_trace wrote, and checking what every such
 * trace must satisfy: each span on a named track; each step span inside the run span before it on
 * its track; run spans on one track in time order without overlap; marks likewise.  Failures
 * are cmocka failures naming the event. */
#ifndef VKG_TEST_PROFILE_CHECK_H
#define VKG_TEST_PROFILE_CHECK_H

#define TRACE_MAX_THREADS 16
#define TRACE_MAX_SPANS 256

typedef struct trace_span {
    int tid;
    double ts, dur;   /* microseconds */
    char name[96];
} trace_span;

typedef struct trace_info {
    int n_threads;
    int tid[TRACE_MAX_THREADS];
    char thread[TRACE_MAX_THREADS][96];   /* thread_name of tid[i] */
    int n_runs;
    trace_span runs[TRACE_MAX_SPANS];     /* in file order */
    int n_marks;
    trace_span marks[TRACE_MAX_SPANS];
    int n_steps;
    double step_us[TRACE_MAX_THREADS];    /* the durations of the steps on tid[i], summed */
    char clock[256];                      /* otherData.clock */
} trace_info;

void trace_check(const char *path, trace_info *out);
/* The index of the thread named `name` in info, or -1. */
int trace_thread(const trace_info *info, const char *name);

/* One summary that vkg_device_profile_print printed ("<title> by layer:" or "... by op:"). */
typedef struct profile_group {
    char key[40];
    double total_us, share, mean_us;
    long count;
} profile_group;

typedef struct profile_summary {
    int n;
    profile_group group[64];
    double total_us;      /* its "total" row */
    long count;
} profile_summary;

/* Finds the summary headed "<title> by <by>:" in text; fails when it is absent or malformed. */
void profile_summary_parse(const char *text, const char *title, const char *by, profile_summary *out);
const profile_group *profile_summary_find(const profile_summary *s, const char *key);

#endif
