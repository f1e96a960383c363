#include "base/file_open.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

const char *vkg_file_kind(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a plain file";
}

int vkg_open_regular(const char *path, struct stat *info, const char **what) {
    *what = NULL;
    /* O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, forever if none comes.
     * The type is checked on the descriptor, after open, so the file cannot be swapped between a
     * stat() and the open(). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int why = errno;
        close(fd);
        errno = why;
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        *what = vkg_file_kind(sb.st_mode);
        errno = 0;
        return -1;
    }
    /* Regular files never block; clear the flag anyway so later reads behave as plain reads. */
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int why = errno;
        close(fd);
        errno = why;
        return -1;
    }
    if (info) *info = sb;
    return fd;
}

FILE *vkg_fopen_regular(const char *path, struct stat *info, const char **what) {
    int fd = vkg_open_regular(path, info, what);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int why = errno;
        close(fd);
        errno = why;
    }
    return f;
}
