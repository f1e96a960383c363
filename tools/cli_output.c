/* Failures to write what a command produces must end in exit status 1, never 0: standard output
 * closed or full (`>&-`, `>/dev/full`), and files written after the main result, such as the
 * --trace file.  main() calls cli_output_guard first and cli_output_finish last, so one place
 * covers every command. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int late_failure;

void cli_output_guard(void) {
    /* A closed descriptor 0-2 would be handed to the next file opened (an -o file would then
     * receive what is printed to stdout).  Hold each closed one with /dev/null opened read-only:
     * reads see an empty input and writes fail with EBADF, which cli_output_finish reports. */
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
            int got = open("/dev/null", O_RDONLY);
            if (got >= 0 && got != fd) { /* not the lowest free one: should not happen, keep going */
                dup2(got, fd);
                close(got);
            }
        }
}

void cli_note_output_failure(void) { late_failure = 1; }

int cli_output_finish(const char *cmd, int rc) {
    errno = 0;
    int flushed = fflush(stdout) == 0;
    int why = errno;
    if (rc == 0 && (!flushed || ferror(stdout)))
        rc = cli_fail(cmd, "cannot write to standard output: %s", strerror(why ? why : EIO));
    if (rc == 0 && late_failure) rc = 1; /* the message was printed when it happened */
    return rc;
}
