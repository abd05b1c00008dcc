/* status.c — status names, VkResult names, and error formatting. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"

const char *hl_status_name(hl_status code) {
    switch (code) {
        case HL_OK:
            return "HL_OK";
        case HL_ERR_INVALID_ARGUMENT:
            return "HL_ERR_INVALID_ARGUMENT";
        case HL_ERR_INVALID_VARIANT:
            return "HL_ERR_INVALID_VARIANT";
        case HL_ERR_NO_DEVICE:
            return "HL_ERR_NO_DEVICE";
        case HL_ERR_DEVICE_INDEX:
            return "HL_ERR_DEVICE_INDEX";
        case HL_ERR_DEVICE_CLOSED:
            return "HL_ERR_DEVICE_CLOSED";
        case HL_ERR_DEVICE_LOST:
            return "HL_ERR_DEVICE_LOST";
        case HL_ERR_OUT_OF_MEMORY:
            return "HL_ERR_OUT_OF_MEMORY";
        case HL_ERR_TOO_LARGE:
            return "HL_ERR_TOO_LARGE";
        case HL_ERR_UNSUPPORTED:
            return "HL_ERR_UNSUPPORTED";
        case HL_ERR_UNSUPPORTED_VARIANT:
            return "HL_ERR_UNSUPPORTED_VARIANT";
        case HL_ERR_UNSUPPORTED_DTYPE:
            return "HL_ERR_UNSUPPORTED_DTYPE";
        case HL_ERR_VULKAN:
            return "HL_ERR_VULKAN";
        case HL_ERR_TIMEOUT:
            return "HL_ERR_TIMEOUT";
        case HL_ERR_INTERRUPTED:
            return "HL_ERR_INTERRUPTED";
    }
    return "HL_ERR_UNKNOWN";
}

// clang-format off: an X-macro table reads best as a table
const char *hl_vk_result_name(int32_t r) {
    switch ((VkResult)r) {
#define N(x) case x: return #x;
    N(VK_SUCCESS) N(VK_NOT_READY) N(VK_TIMEOUT) N(VK_EVENT_SET) N(VK_EVENT_RESET)
    N(VK_INCOMPLETE) N(VK_ERROR_OUT_OF_HOST_MEMORY) N(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    N(VK_ERROR_INITIALIZATION_FAILED) N(VK_ERROR_DEVICE_LOST) N(VK_ERROR_MEMORY_MAP_FAILED)
    N(VK_ERROR_LAYER_NOT_PRESENT) N(VK_ERROR_EXTENSION_NOT_PRESENT)
    N(VK_ERROR_FEATURE_NOT_PRESENT) N(VK_ERROR_INCOMPATIBLE_DRIVER)
    N(VK_ERROR_TOO_MANY_OBJECTS) N(VK_ERROR_FORMAT_NOT_SUPPORTED) N(VK_ERROR_FRAGMENTED_POOL)
    N(VK_ERROR_UNKNOWN) N(VK_ERROR_OUT_OF_POOL_MEMORY) N(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    N(VK_ERROR_FRAGMENTATION) N(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    N(VK_PIPELINE_COMPILE_REQUIRED) N(VK_ERROR_INVALID_SHADER_NV)
#undef N
    default: return "VK_RESULT_UNKNOWN";
    }
}
// clang-format on

hl_status hl_fail(hl_error *err, hl_status code, const char *fmt, ...) {
    if (err) {
        /* Format into a copy: callers may pass err->message itself as an argument
         * to add context. */
        char buf[sizeof err->message];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        memcpy(err->message, buf, sizeof buf);
        err->code = code;
        err->vk_result = 0;
    }
    return code;
}

hl_status hl_vk_fail(hl_error *err, VkResult vr, const char *call, const char *file, int line) {
    hl_status code = HL_ERR_VULKAN;
    if (vr == VK_ERROR_OUT_OF_DEVICE_MEMORY || vr == VK_ERROR_OUT_OF_HOST_MEMORY)
        code = HL_ERR_OUT_OF_MEMORY;
    else if (vr == VK_ERROR_DEVICE_LOST)
        code = HL_ERR_DEVICE_LOST;
    else if (vr == VK_TIMEOUT)
        code = HL_ERR_TIMEOUT;
    const char *base = strrchr(file, '/');
    hl_fail(err, code, "%s failed: %s (%d) at %s:%d", call, hl_vk_result_name(vr), (int)vr, base ? base + 1 : file,
            line);
    if (err) err->vk_result = (int32_t)vr;
    return code;
}

const char *hl_dtype_name(hl_dtype t) {
    switch (t) {
        case HL_F16:
            return "f16";
        case HL_F32:
            return "f32";
        case HL_BF16:
            return "bf16";
    }
    return "?";
}

size_t hl_dtype_size(hl_dtype t) { return t == HL_F32 ? 4 : 2; }

double hl_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
