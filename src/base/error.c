#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>

vkg_status vkg_error_set(vkg_error *err, vkg_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

void vkg_error_clear(vkg_error *err) {
    if (err) {
        err->status = VKG_OK;
        err->message[0] = '\0';
    }
}

const char *vkg_status_name(vkg_status status) {
    switch (status) {
    case VKG_OK: return "ok";
    case VKG_ERR_INVALID_ARGUMENT: return "invalid argument";
    case VKG_ERR_SHAPE: return "shape mismatch";
    case VKG_ERR_OUT_OF_MEMORY: return "out of memory";
    case VKG_ERR_IO: return "i/o error";
    case VKG_ERR_FORMAT: return "malformed file";
    case VKG_ERR_NO_DEVICE: return "no device";
    case VKG_ERR_DEVICE: return "device error";
    case VKG_ERR_DEVICE_LOST: return "device lost";
    case VKG_ERR_OUT_OF_DEVICE_MEMORY: return "out of device memory";
    case VKG_ERR_TIMEOUT: return "timeout";
    case VKG_ERR_UNSUPPORTED: return "unsupported";
    case VKG_ERR_NOT_FOUND: return "not found";
    case VKG_ERR_NOT_FINITE: return "not finite";
    case VKG_ERR_CANCELLED: return "cancelled";
    }
    return "unknown status";
}
