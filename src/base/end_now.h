/* For programs (the vkgraph tool, tests), never the library: ending the process while a Vulkan
 * driver's threads may still run abandoned work, whose exit handlers would tear down what that
 * work uses.  No exit handlers then, only what exit would still owe: stdio flushed, and under
 * AddressSanitizer the leak check. */
#ifndef VKG_BASE_END_NOW_H
#define VKG_BASE_END_NOW_H

#include <stdio.h>
#include <stdnoreturn.h>
#include <unistd.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

static inline noreturn void vkg_end_now(int status) {
    fflush(NULL);
#ifdef __SANITIZE_ADDRESS__
    __lsan_do_leak_check();
#endif
    _exit(status);
}

#endif
