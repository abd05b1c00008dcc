/* cuda.c — the CUDA driver API for interop, opened at run time (dlopen of
 * libcuda.so.1, as vkload.c opens the Vulkan loader): no CUDA toolkit at build
 * time, and without the NVIDIA driver every interop call fails with
 * HL_ERR_UNSUPPORTED naming what is missing while everything else works.
 * HELIOS_CUDA_DRIVER names another library file (tests use a missing one).
 *
 * What it does: finds the CUDA device with the Vulkan device's UUID, retains
 * that device's primary context (the one torch uses), and imports a tensor's
 * exportable Vulkan memory (an opaque fd of a dedicated allocation) as a CUDA
 * pointer; the mapping is released before the Vulkan memory is freed; and shares
 * the device's timeline semaphore with CUDA streams. The other way, a pool of CUDA
 * memory Vulkan imports: cuda_pool.c. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_driver.h"

#define HL_CU_DEFINE(name, params) pfn_##name p_##name;
HL_CU_FUNCS(HL_CU_DEFINE)
#undef HL_CU_DEFINE

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[512];

static void load(void) {
    const char *path = getenv("HELIOS_CUDA_DRIVER");
    if (!path || !*path) path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error,
                 "CUDA interop needs the NVIDIA driver's CUDA library (%s could not be loaded: %s); "
                 "Helios's own operations do not need it",
                 path, why ? why : "not found");
        return;
    }
    /* The handle stays open for the life of the process: the pointers live in it. */
#define HL_CU_RESOLVE(name, params)                                                                                    \
    if (!(p_##name = (pfn_##name)dlsym(lib, #name))) {                                                                 \
        snprintf(load_error, sizeof load_error,                                                                        \
                 "the CUDA driver library %s has no %s: CUDA interop needs a driver from CUDA 11.4 or newer", path,    \
                 #name);                                                                                               \
        return;                                                                                                        \
    }
    HL_CU_FUNCS(HL_CU_RESOLVE)
#undef HL_CU_RESOLVE
    CUresult r = p_cuInit(0);
    if (r != 0) snprintf(load_error, sizeof load_error, "CUDA interop: cuInit failed (CUresult %d)", r);
}

hl_status hl_cu_load(hl_error *err) {
    pthread_once(&once, load);
    if (load_error[0]) return hl_fail(err, HL_ERR_UNSUPPORTED, "%s", load_error);
    return HL_OK;
}

hl_status hl_cu_fail(hl_error *err, CUresult r, const char *call) {
    const char *name = NULL;
    if (p_cuGetErrorName) p_cuGetErrorName(r, &name);
    return hl_fail(err, HL_ERR_UNSUPPORTED, "CUDA interop: %s failed: %s (%d)", call, name ? name : "CUresult", r);
}

/* Loads the driver and finds this Vulkan device's CUDA ordinal (by UUID) and
 * primary context, once per device. */
static hl_status cuda_attach(hl_device *dev, hl_error *err) {
    hl_status st = HL_OK;
    if (dev->cuda.ctx) return HL_OK;
    hl_status loaded = hl_cu_load(err);
    if (loaded != HL_OK) return loaded; /* before anything to clean up */
    if (!dev->caps.external_memory_fd)
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "CUDA interop: device '%s' does not offer VK_KHR_external_memory_fd (memory Vulkan can "
                       "export to CUDA)",
                       dev->caps.name);
    int n = 0;
    HL_CU(cuDeviceGetCount(&n));
    for (int i = 0; i < n; i++) {
        CUdevice d;
        CUuuid u;
        HL_CU(cuDeviceGet(&d, i));
        HL_CU(cuDeviceGetUuid_v2(&u, d));
        if (memcmp(u.bytes, dev->caps.uuid, sizeof u.bytes) != 0) continue;
        CUcontext ctx;
        HL_CU(cuDevicePrimaryCtxRetain(&ctx, d));
        dev->cuda.device = d;
        dev->cuda.ordinal = i;
        dev->cuda.ctx = ctx;
        return HL_OK;
    }
    return hl_fail(err, HL_ERR_UNSUPPORTED,
                   "CUDA interop: none of the %d CUDA devices has the UUID of '%s' (a Vulkan device CUDA does not "
                   "drive, or one hidden by CUDA_VISIBLE_DEVICES)",
                   n, dev->caps.name);
fail:
    return st;
}

hl_status hl_cuda_ordinal(hl_device *dev, int *ordinal, hl_error *err) {
    hl_status st = cuda_attach(dev, err);
    if (st == HL_OK) *ordinal = dev->cuda.ordinal;
    return st;
}

hl_status hl_cuda_import(hl_device *dev, hl_buffer *b, uint64_t bytes, hl_error *err) {
    hl_status st = HL_OK;
    int fd = -1;
    CUexternalMemory ext = NULL;
    int pushed = 0;
    if (b->cuda_ptr) return HL_OK;
    HL_TRY(cuda_attach(dev, err));
    if (!b->exportable)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "CUDA interop: the tensor was not allocated exportable");
    VkMemoryGetFdInfoKHR gi = {.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
                               .memory = b->memory,
                               .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    HL_VK(dev->get_memory_fd(dev->device, &gi, &fd));
    HL_CU(cuCtxPushCurrent_v2((CUcontext)dev->cuda.ctx));
    pushed = 1;
    /* The size and the dedicated flag must be the allocation's own. */
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC hd = {.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
                                           .handle.fd = fd,
                                           .size = b->alloc_bytes,
                                           .flags = CUDA_EXTERNAL_MEMORY_DEDICATED};
    HL_CU(cuImportExternalMemory(&ext, &hd));
    fd = -1; /* the import owns it now */
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC bd = {.offset = 0, .size = bytes};
    unsigned long long ptr = 0;
    HL_CU(cuExternalMemoryGetMappedBuffer(&ptr, ext, &bd));
    CUcontext popped;
    p_cuCtxPopCurrent_v2(&popped);
    b->cuda_ext = ext;
    b->cuda_ptr = ptr;
    dev->tel.cuda_imports++;
    return HL_OK;
fail:
    if (ext) p_cuDestroyExternalMemory(ext);
    if (pushed) {
        CUcontext popped;
        p_cuCtxPopCurrent_v2(&popped);
    }
    if (fd >= 0) close(fd);
    return st;
}

void hl_cuda_release(hl_device *dev, hl_buffer *b) {
    if (!b->cuda_ptr && !b->cuda_ext) return;
    CUcontext popped;
    int pushed = p_cuCtxPushCurrent_v2((CUcontext)dev->cuda.ctx) == 0;
    /* The mapped pointer goes before the external memory, both before Vulkan frees it. */
    if (b->cuda_ptr) p_cuMemFree_v2(b->cuda_ptr);
    if (b->cuda_ext) p_cuDestroyExternalMemory((CUexternalMemory)b->cuda_ext);
    if (pushed) p_cuCtxPopCurrent_v2(&popped);
    b->cuda_ptr = 0;
    b->cuda_ext = NULL;
    dev->tel.cuda_imports--;
}

void hl_cuda_detach(hl_device *dev) {
    if (!dev->cuda.ctx) return;
    p_cuDevicePrimaryCtxRelease_v2(dev->cuda.device);
    dev->cuda.ctx = NULL;
}

hl_status hl_cuda_import_semaphore(hl_device *dev, int fd, hl_error *err) {
    hl_status st = HL_OK;
    int pushed = 0;
    HL_TRY(cuda_attach(dev, err));
    HL_CU(cuCtxPushCurrent_v2((CUcontext)dev->cuda.ctx));
    pushed = 1;
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC hd = {.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
                                              .handle.fd = fd};
    CUexternalSemaphore sem = NULL;
    HL_CU(cuImportExternalSemaphore(&sem, &hd)); /* owns fd from here */
    fd = -1;
    dev->cuda.sem = sem;
fail:
    if (pushed) {
        CUcontext popped;
        p_cuCtxPopCurrent_v2(&popped);
    }
    if (fd >= 0) close(fd);
    return st;
}

/* Stream work on the shared semaphore, in the device's primary context. */
static hl_status stream_op(hl_device *dev, uint64_t stream, uint64_t value, int signal, hl_error *err) {
    hl_status st = HL_OK;
    if (!dev->cuda.sem) return hl_fail(err, HL_ERR_UNSUPPORTED, "CUDA interop: no semaphore shared with CUDA yet");
    CUexternalSemaphore sem = (CUexternalSemaphore)dev->cuda.sem;
    const double t0 = hl_now_ms();
    HL_CU(cuCtxPushCurrent_v2((CUcontext)dev->cuda.ctx));
    CUresult r;
    if (signal) {
        CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp = {.params.fence.value = value};
        r = p_cuSignalExternalSemaphoresAsync(&sem, &sp, 1, (CUstream)(uintptr_t)stream);
    } else {
        CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp = {.params.fence.value = value};
        r = p_cuWaitExternalSemaphoresAsync(&sem, &wp, 1, (CUstream)(uintptr_t)stream);
    }
    CUcontext popped;
    p_cuCtxPopCurrent_v2(&popped);
    dev->tel.cuda_call_ms += hl_now_ms() - t0;
    if (r != 0) return hl_cu_fail(err, r, signal ? "cuSignalExternalSemaphoresAsync" : "cuWaitExternalSemaphoresAsync");
    return HL_OK;
fail:
    return st;
}

hl_status hl_cuda_stream_signal(hl_device *dev, uint64_t stream, uint64_t value, hl_error *err) {
    return stream_op(dev, stream, value, 1, err);
}

hl_status hl_cuda_stream_wait(hl_device *dev, uint64_t stream, uint64_t value, hl_error *err) {
    return stream_op(dev, stream, value, 0, err);
}

void hl_cuda_release_semaphore(hl_device *dev) {
    if (!dev->cuda.sem) return;
    p_cuDestroyExternalSemaphore((CUexternalSemaphore)dev->cuda.sem);
    dev->cuda.sem = NULL;
}
