/* Opening an input file without the traps of special files: a FIFO would block in open() until
 * some writer came, and a directory or device has no meaningful size.  Every file the library
 * reads (config.json, model.safetensors, the tokenizer files, .npy, the pipeline cache) goes
 * through here. */
#ifndef VKG_IO_FILE_OPEN_H
#define VKG_IO_FILE_OPEN_H

#include <stdio.h>
#include <sys/stat.h>

/* A read-only descriptor of the regular file at path, in blocking mode, or -1.  On -1, either
 * open/fstat failed (errno says why, *what is NULL) or the path is something else, and *what
 * names it ("a FIFO", "a directory", ...; errno is 0).  info, if not NULL, gets the fstat. */
int vkg_open_regular(const char *path, struct stat *info, const char **what);

/* The same as a stdio stream ("rb"). */
FILE *vkg_fopen_regular(const char *path, struct stat *info, const char **what);

/* "a FIFO", "a directory", "a socket", "a character device", "a block device", "a symbolic
 * link" or "not a plain file" for a mode that is not S_ISREG. */
const char *vkg_file_kind(mode_t mode);

#endif
