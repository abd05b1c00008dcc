/* buffer.h — a Vulkan buffer and its memory (csrc/core/runtime/buffer.c). */
#ifndef HELIOS_BUFFER_H
#define HELIOS_BUFFER_H

#include <stdint.h>

#include <vulkan/vulkan.h>

/* A buffer and its memory. */
typedef struct hl_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize size;
    VkDeviceSize alloc_bytes; /* what the allocation took (device-local accounting) */
    int host_visible;
    void *mapped;   /* host-visible buffers only */
    int exportable; /* a dedicated allocation CUDA can import (opaque fd) */
    void *cuda_ext; /* its CUDA import (CUexternalMemory) and mapped pointer, once imported */
    uint64_t cuda_ptr;
    int imported; /* the memory is another API's (an opaque fd Vulkan imported) */
} hl_buffer;

#endif
