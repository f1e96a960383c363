/* Small helpers shared by the commands: option values and uniform error reporting. */
#ifndef VKG_CLI_H
#define VKG_CLI_H

#include "cli_args.h"
#include "vkgraph.h"

#include <stddef.h>
#include <stdint.h>

/* Prints "vkgraph CMD: message" to stderr and returns 1 (the exit status for user errors). */
int cli_fail(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The value after option argv[*i] (advancing *i), or NULL with a message when missing. */
const char *cli_value(const char *cmd, int argc, char **argv, int *i);
/* Parses an integer in [lo, hi]; 0 on success, 1 with a message otherwise.  A hi of 2^30 or more
 * only guards the arithmetic: the message then says "LO or more" (or "at most HI" when over). */
int cli_int(const char *cmd, const char *opt, const char *text, long lo, long hi, long *out);
int cli_float(const char *cmd, const char *opt, const char *text, double *out);
/* Refuses a file name that does not end in ext (".png"; case ignored), so that what is written
 * is what the name says: "--png x.jpg: writes PNG; name the file .png".  0, or 1 after the
 * message. */
int cli_check_extension(const char *cmd, const char *opt, const char *path, const char *ext, const char *format);
/* A prompt file given with -f (or standard input for "-") as raw bytes, NUL-terminated, or NULL
 * after printing "vkgraph CMD: ..." (unreadable, or longer than CLI_PROMPT_MAX_BYTES).  A FIFO
 * or standard input is fine here, so the file need not be regular; the bound is what keeps
 * `-f /dev/zero` from reading until memory runs out. */
#define CLI_PROMPT_MAX_BYTES ((size_t)64 << 20)
char *cli_read_file(const char *cmd, const char *path, size_t *len);
/* Parses a list of ids given to option opt: "464,5044", "464 5044" or "[464, 5044]" (commas or
 * spaces between ids, brackets allowed, spaces around the whole ignored): the one grammar of every
 * option that reads ids, and what `tokenize` and `generate --ids-out` print.  0 and *ids (caller
 * frees) and *n, or 1 after printing what is wrong and at which character (an empty list is an
 * error, and so is an empty item or a sign: "1,2,", ",1", "1,,2", "[1,2", "+1"). */
int cli_parse_ids(const char *cmd, const char *opt, const char *spec, int32_t **ids, size_t *n);
/* Fills the Vulkan settings of o from the environment (cli_env.c: VKG_VALIDATION,
 * VKG_SYNC_VALIDATION, VKG_TIMEOUT_MS, VKG_PIPELINE_CACHE, VKG_MATMUL, VKG_VULKAN_STEPS): 0, or 1
 * after printing what is wrong with a value. */
int cli_device_options_from_env(const char *cmd, vkg_device_options *o);
/* Opens the device named by --device (NULL: the best one), with the environment's settings,
 * printing errors.  With --profile, every session on it records the time of each step. */
int cli_open_device(const char *cmd, const char *spec, int threads, vkg_device **dev);
/* When the model's length was asked for (`asked`, vkg_context_options' n_ctx, is 0) and the
 * context came out shorter (n_ctx: the device holds no cache that long), says so on stderr, with
 * `hint` in brackets (the option that sets the length, or what the shorter cache means); a length
 * asked for is what the user chose, and no note.  dev NULL: the portable limits. */
void cli_note_context(const char *cmd, int asked, int n_ctx, int model_ctx, const char *hint, const vkg_device *dev);
/* `hint` where st says memory ran short (a shorter KV cache may fit), else "". */
const char *cli_memory_hint(vkg_status st, const char *hint);
/* Frees a device opened by cli_open_device; with --profile, first prints its profile to stderr
 * and writes the Chrome trace (--trace FILE, default vkgraph-trace.json). */
void cli_close_device(const char *cmd, vkg_device *dev);
/* 1 when a device closed with cli_close_device still had work running (a run that timed out and
 * was given up): main then ends with _exit (vkg_device_has_abandoned_work). */
int cli_device_work_abandoned(void);
/* Called first and last in main (cli_output.c): keeps descriptors 0-2 from being reused when
 * closed, and turns a failed write to stdout, or a failure noted with cli_note_output_failure
 * (its message already printed), into exit status 1. */
void cli_output_guard(void);
void cli_note_output_failure(void);
int cli_output_finish(const char *cmd, int rc);
/* Takes the profiling options (--profile, --trace FILE, --group-by G) out of argv.  A command
 * that runs no graph (profiles = 0) refuses them, since they would do nothing there; one that
 * does checks the trace file can be written before any work.  1 on error (printed). */
#define CLI_TRACE_DEFAULT "vkgraph-trace.json"
int cli_take_common_options(int *argc, char **argv, int profiles);
/* Checks that an output file can be written before the work that fills it starts, so that a bad
 * path fails in a second, not after the model has loaded and run: creates it (and removes it
 * again) when it is new, opens an existing one for writing (without truncating it).  0, or 1
 * after "CMD: OPT PATH: cannot write: REASON". */
int cli_check_output(const char *cmd, const char *opt, const char *path);
/* --threads N sets the CPU executor's threads: refused (1, after a message) when the device
 * opened is not the CPU executor, rather than silently ignored. */
int cli_check_threads(const char *cmd, long threads, vkg_device *dev);
/* For an option whose value is one of n names: "OPT 'VALUE' is unknown; did you mean 'X'?" (the
 * closest name, when one is close), listing the names.  Returns 1. */
int cli_unknown_value(const char *cmd, const char *opt, const char *value, const char *const *names, int n);
/* Refuses an option that a command has no use for but users carry over from the others (--device
 * to a command that opens no device): "OPT does not apply to vkgraph CMD: WHY".  Returns 1. */
int cli_not_applicable(const char *cmd, const char *opt, const char *why);
#endif
