/* cuda_pool.c — the pool torch allocates from (helios.torch.memory_pool): CUDA
 * memory made with the virtual-memory API (cuMemCreate with a POSIX fd handle,
 * mapped at an address torch's caching allocator carves tensors from:
 * helios_cuda_alloc / helios_cuda_free, a CUDAPluggableAllocator), each segment
 * exported once as an fd that Vulkan imports with no copy. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_driver.h"

typedef struct pool_seg {
    uint64_t id, ptr, size;
    unsigned long long handle; /* CUmemGenericAllocationHandle */
    int fd;                    /* its POSIX fd export: each Vulkan import takes a dup */
    int device;                /* CUDA ordinal */
    struct pool_seg *next;
} pool_seg;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_seg *pool_head;
static uint64_t pool_next_id = 1, pool_count, pool_bytes;
static char pool_error[640]; /* why the last helios_cuda_alloc returned NULL */

/* Runs with `device`'s primary context current (the VMM calls need one). */
static hl_status with_primary(int device, CUcontext *ctx, CUdevice *d, hl_error *err) {
    hl_status st = HL_OK;
    HL_CU(cuDeviceGet(d, device));
    HL_CU(cuDevicePrimaryCtxRetain(ctx, *d));
    if (p_cuCtxPushCurrent_v2(*ctx) != 0) {
        p_cuDevicePrimaryCtxRelease_v2(*d);
        return hl_fail(err, HL_ERR_UNSUPPORTED, "CUDA interop: cuCtxPushCurrent failed");
    }
    return HL_OK;
fail:
    return st;
}

static void end_primary(CUdevice d) {
    CUcontext popped;
    p_cuCtxPopCurrent_v2(&popped);
    p_cuDevicePrimaryCtxRelease_v2(d);
}

hl_status hl_cuda_pool_alloc(uint64_t size, int device, uint64_t *out, hl_error *err) {
    hl_status st = HL_OK;
    unsigned long long handle = 0, ptr = 0;
    int fd = -1, have_handle = 0, reserved = 0, mapped = 0;
    size_t gran = 0, sz = 0;
    CUcontext ctx;
    CUdevice d;
    *out = 0;
    hl_status loaded = hl_cu_load(err);
    if (loaded != HL_OK) return loaded; /* before anything to clean up */
    pool_seg *seg = calloc(1, sizeof *seg);
    if (!seg) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    st = with_primary(device, &ctx, &d, err);
    if (st != HL_OK) {
        free(seg);
        return st;
    }
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, device}};
    HL_CU(cuMemGetAllocationGranularity(&gran, &prop, 0));
    sz = (size_t)((size ? size : 1) + gran - 1) / gran * gran;
    HL_CU(cuMemCreate(&handle, sz, &prop, 0));
    have_handle = 1;
    HL_CU(cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    HL_CU(cuMemAddressReserve(&ptr, sz, gran, 0, 0));
    reserved = 1;
    HL_CU(cuMemMap(ptr, sz, 0, handle, 0));
    mapped = 1;
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, device}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    HL_CU(cuMemSetAccess(ptr, sz, &access, 1));
    end_primary(d);
    seg->ptr = ptr;
    seg->size = sz;
    seg->handle = handle;
    seg->fd = fd;
    seg->device = device;
    pthread_mutex_lock(&pool_lock);
    seg->id = pool_next_id++;
    seg->next = pool_head;
    pool_head = seg;
    pool_count++;
    pool_bytes += sz;
    pthread_mutex_unlock(&pool_lock);
    *out = ptr;
    return HL_OK;
fail:
    if (mapped) p_cuMemUnmap(ptr, sz);
    if (reserved) p_cuMemAddressFree(ptr, sz);
    if (have_handle) p_cuMemRelease(handle);
    if (fd >= 0) close(fd);
    end_primary(d);
    free(seg);
    return st;
}

void hl_cuda_pool_free(uint64_t ptr) {
    pthread_mutex_lock(&pool_lock);
    pool_seg **at = &pool_head, *seg = NULL;
    for (; *at; at = &(*at)->next)
        if ((*at)->ptr == ptr) {
            seg = *at;
            *at = seg->next;
            pool_count--;
            pool_bytes -= seg->size;
            break;
        }
    pthread_mutex_unlock(&pool_lock);
    if (!seg) return;
    /* Vulkan imports hold their own reference to the physical memory: releasing
     * CUDA's side here never pulls pages from under a Helios tensor. */
    CUcontext ctx;
    CUdevice d;
    hl_error err;
    int pushed = with_primary(seg->device, &ctx, &d, &err) == HL_OK;
    p_cuMemUnmap(seg->ptr, seg->size);
    p_cuMemAddressFree(seg->ptr, seg->size);
    p_cuMemRelease(seg->handle);
    if (pushed) end_primary(d);
    close(seg->fd);
    free(seg);
}

int hl_cuda_pool_lookup(uint64_t ptr, uint64_t bytes, uint64_t *id, uint64_t *base, uint64_t *size, int *device) {
    int found = 0;
    pthread_mutex_lock(&pool_lock);
    for (pool_seg *s = pool_head; s; s = s->next)
        if (ptr >= s->ptr && bytes <= s->size && ptr - s->ptr <= s->size - bytes) {
            *id = s->id;
            *base = s->ptr;
            *size = s->size;
            *device = s->device;
            found = 1;
            break;
        }
    pthread_mutex_unlock(&pool_lock);
    return found;
}

hl_status hl_cuda_pool_dup(uint64_t id, int *fd, uint64_t *size, int *device, hl_error *err) {
    hl_status st = HL_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&pool_lock);
    for (pool_seg *s = pool_head; s; s = s->next)
        if (s->id == id) {
            *fd = dup(s->fd);
            *size = s->size;
            *device = s->device;
            st = *fd >= 0 ? HL_OK : HL_ERR_OUT_OF_MEMORY;
            break;
        }
    pthread_mutex_unlock(&pool_lock);
    if (st == HL_ERR_INVALID_ARGUMENT)
        return hl_fail(err, st, "CUDA interop: pool segment %llu was freed (torch released it)",
                       (unsigned long long)id);
    if (st != HL_OK) return hl_fail(err, st, "CUDA interop: dup of a pool segment's fd failed");
    return HL_OK;
}

void hl_cuda_pool_usage(uint64_t *segments, uint64_t *bytes) {
    pthread_mutex_lock(&pool_lock);
    *segments = pool_count;
    *bytes = pool_bytes;
    pthread_mutex_unlock(&pool_lock);
}

const char *hl_cuda_pool_last_error(void) { return pool_error; }

/* The allocator torch calls (torch.cuda.memory.CUDAPluggableAllocator loads this
 * module's file and looks these two up): C linkage, exported from the module. */
__attribute__((visibility("default"))) void *helios_cuda_alloc(ssize_t size, int device, void *stream) {
    (void)stream;
    hl_error err = {0};
    uint64_t ptr = 0;
    if (size < 0 || hl_cuda_pool_alloc((uint64_t)size, device, &ptr, &err) != HL_OK) {
        snprintf(pool_error, sizeof pool_error, "%s", size < 0 ? "negative size" : err.message);
        return NULL;
    }
    return (void *)(uintptr_t)ptr;
}

__attribute__((visibility("default"))) void helios_cuda_free(void *ptr, ssize_t size, int device, void *stream) {
    (void)size;
    (void)device;
    (void)stream;
    hl_cuda_pool_free((uint64_t)(uintptr_t)ptr);
}
