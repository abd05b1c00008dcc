/* cuda_link.h — a device's link to CUDA (struct hl_device's `cuda`), owned by
 * csrc/core/runtime/cuda.c. */
#ifndef HELIOS_CUDA_LINK_H
#define HELIOS_CUDA_LINK_H

typedef struct hl_cuda_link {
    void *ctx; /* the primary context, once attached */
    int device, ordinal;
    void *sem; /* the async timeline's CUDA import (CUexternalSemaphore) */
} hl_cuda_link;

#endif
