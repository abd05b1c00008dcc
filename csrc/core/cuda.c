/* cuda.c — the CUDA driver API for interop, opened at run time (dlopen of
 * libcuda.so.1, as vkload.c opens the Vulkan loader): no CUDA toolkit at build
 * time, and without the NVIDIA driver every interop call fails with
 * HL_ERR_UNSUPPORTED naming what is missing while everything else works.
 * HELIOS_CUDA_DRIVER names another library file (tests use a missing one).
 *
 * What it does: finds the CUDA device with the Vulkan device's UUID, retains
 * that device's primary context (the one torch uses), and imports a tensor's
 * exportable Vulkan memory (an opaque fd of a dedicated allocation) as a CUDA
 * pointer; the mapping is released before the Vulkan memory is freed. And the
 * other way: a pool of CUDA memory made with the virtual-memory API (cuMemCreate
 * with a POSIX fd handle, mapped at an address torch's caching allocator carves
 * tensors from: helios_cuda_alloc / helios_cuda_free, a CUDAPluggableAllocator),
 * each segment exported once as an fd that Vulkan imports with no copy. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* The driver API's types, as cuda.h declares them (the ABI is stable). */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUextMemory_st *CUexternalMemory;
typedef struct {
    char bytes[16];
} CUuuid;
#define CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD 1
#define CUDA_EXTERNAL_MEMORY_DEDICATED 0x1
typedef struct {
    int type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
        const void *nvSciBufObject;
    } handle;
    unsigned long long size;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_HANDLE_DESC;
typedef struct {
    unsigned long long offset;
    unsigned long long size;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_BUFFER_DESC;

/* The virtual-memory API (cuda.h's layouts). */
typedef struct {
    int type; /* CU_MEM_LOCATION_TYPE_DEVICE */
    int id;
} CUmemLocation;
typedef struct {
    int type;                 /* CU_MEM_ALLOCATION_TYPE_PINNED */
    int requestedHandleTypes; /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;
typedef struct {
    CUmemLocation location;
    int flags; /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE */
} CUmemAccessDesc;
#define CU_MEM_ALLOCATION_TYPE_PINNED 1
#define CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 1
#define CU_MEM_LOCATION_TYPE_DEVICE 1
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 3

/* Timeline semaphores shared with Vulkan (cuda.h's layouts). */
typedef struct CUextSemaphore_st *CUexternalSemaphore;
typedef struct CUstream_st *CUstream;
#define CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD 9
typedef struct {
    int type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
        const void *nvSciSyncObj;
    } handle;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC;
typedef struct {
    struct {
        struct {
            unsigned long long value;
        } fence;
        union {
            void *fence;
            unsigned long long reserved;
        } nvSciSync;
        struct {
            unsigned long long key;
        } keyedMutex;
        unsigned int reserved[12];
    } params;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS;
typedef struct {
    struct {
        struct {
            unsigned long long value;
        } fence;
        union {
            void *fence;
            unsigned long long reserved;
        } nvSciSync;
        struct {
            unsigned long long key;
            unsigned int timeoutMs;
        } keyedMutex;
        unsigned int reserved[10];
    } params;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS;

// clang-format off: one entry point a line (symbol, parameters); each returns a CUresult
#define HL_CU_FUNCS(X) \
    X(cuInit, (unsigned)) \
    X(cuGetErrorName, (CUresult, const char **)) \
    X(cuDeviceGetCount, (int *)) \
    X(cuDeviceGet, (CUdevice *, int)) \
    X(cuDeviceGetUuid_v2, (CUuuid *, CUdevice)) \
    X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice)) \
    X(cuDevicePrimaryCtxRelease_v2, (CUdevice)) \
    X(cuCtxPushCurrent_v2, (CUcontext)) \
    X(cuCtxPopCurrent_v2, (CUcontext *)) \
    X(cuImportExternalMemory, (CUexternalMemory *, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *)) \
    X(cuExternalMemoryGetMappedBuffer, (unsigned long long *, CUexternalMemory, const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *)) \
    X(cuDestroyExternalMemory, (CUexternalMemory)) \
    X(cuMemFree_v2, (unsigned long long)) \
    X(cuImportExternalSemaphore, (CUexternalSemaphore *, const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *)) \
    X(cuSignalExternalSemaphoresAsync, (const CUexternalSemaphore *, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *, unsigned, CUstream)) \
    X(cuWaitExternalSemaphoresAsync, (const CUexternalSemaphore *, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *, unsigned, CUstream)) \
    X(cuDestroyExternalSemaphore, (CUexternalSemaphore)) \
    X(cuMemGetAllocationGranularity, (size_t *, const CUmemAllocationProp *, int)) \
    X(cuMemCreate, (unsigned long long *, size_t, const CUmemAllocationProp *, unsigned long long)) \
    X(cuMemExportToShareableHandle, (void *, unsigned long long, int, unsigned long long)) \
    X(cuMemAddressReserve, (unsigned long long *, size_t, size_t, unsigned long long, unsigned long long)) \
    X(cuMemMap, (unsigned long long, size_t, size_t, unsigned long long, unsigned long long)) \
    X(cuMemSetAccess, (unsigned long long, size_t, const CUmemAccessDesc *, size_t)) \
    X(cuMemUnmap, (unsigned long long, size_t)) \
    X(cuMemAddressFree, (unsigned long long, size_t)) \
    X(cuMemRelease, (unsigned long long))
// clang-format on

#define HL_CU_DEFINE(name, params)                                                                                     \
    typedef CUresult(*pfn_##name) params;                                                                              \
    static pfn_##name p_##name;
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

/* The failing call and the driver's name for its result. */
static hl_status cu_fail(hl_error *err, CUresult r, const char *call) {
    const char *name = NULL;
    if (p_cuGetErrorName) p_cuGetErrorName(r, &name);
    return hl_fail(err, HL_ERR_UNSUPPORTED, "CUDA interop: %s failed: %s (%d)", call, name ? name : "CUresult", r);
}

#define HL_CU(call)                                                                                                    \
    do {                                                                                                               \
        CUresult hl_cr_ = p_##call;                                                                                    \
        if (hl_cr_ != 0) {                                                                                             \
            st = cu_fail(err, hl_cr_, #call);                                                                          \
            goto fail;                                                                                                 \
        }                                                                                                              \
    } while (0)

/* Loads the driver and finds this Vulkan device's CUDA ordinal (by UUID) and
 * primary context, once per device. */
static hl_status cuda_attach(hl_device *dev, hl_error *err) {
    hl_status st = HL_OK;
    if (dev->cuda_ctx) return HL_OK;
    pthread_once(&once, load);
    if (load_error[0]) return hl_fail(err, HL_ERR_UNSUPPORTED, "%s", load_error);
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
        dev->cuda_device = d;
        dev->cuda_ordinal = i;
        dev->cuda_ctx = ctx;
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
    if (st == HL_OK) *ordinal = dev->cuda_ordinal;
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
    HL_CU(cuCtxPushCurrent_v2((CUcontext)dev->cuda_ctx));
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
    int pushed = p_cuCtxPushCurrent_v2((CUcontext)dev->cuda_ctx) == 0;
    /* The mapped pointer goes before the external memory, both before Vulkan frees it. */
    if (b->cuda_ptr) p_cuMemFree_v2(b->cuda_ptr);
    if (b->cuda_ext) p_cuDestroyExternalMemory((CUexternalMemory)b->cuda_ext);
    if (pushed) p_cuCtxPopCurrent_v2(&popped);
    b->cuda_ptr = 0;
    b->cuda_ext = NULL;
    dev->tel.cuda_imports--;
}

void hl_cuda_detach(hl_device *dev) {
    if (!dev->cuda_ctx) return;
    p_cuDevicePrimaryCtxRelease_v2(dev->cuda_device);
    dev->cuda_ctx = NULL;
}

hl_status hl_cuda_import_semaphore(hl_device *dev, int fd, hl_error *err) {
    hl_status st = HL_OK;
    int pushed = 0;
    HL_TRY(cuda_attach(dev, err));
    HL_CU(cuCtxPushCurrent_v2((CUcontext)dev->cuda_ctx));
    pushed = 1;
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC hd = {.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
                                              .handle.fd = fd};
    CUexternalSemaphore sem = NULL;
    HL_CU(cuImportExternalSemaphore(&sem, &hd)); /* owns fd from here */
    fd = -1;
    dev->cuda_sem = sem;
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
    if (!dev->cuda_sem) return hl_fail(err, HL_ERR_UNSUPPORTED, "CUDA interop: no semaphore shared with CUDA yet");
    CUexternalSemaphore sem = (CUexternalSemaphore)dev->cuda_sem;
    const double t0 = hl_now_ms();
    HL_CU(cuCtxPushCurrent_v2((CUcontext)dev->cuda_ctx));
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
    if (r != 0) return cu_fail(err, r, signal ? "cuSignalExternalSemaphoresAsync" : "cuWaitExternalSemaphoresAsync");
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
    if (!dev->cuda_sem) return;
    p_cuDestroyExternalSemaphore((CUexternalSemaphore)dev->cuda_sem);
    dev->cuda_sem = NULL;
}

/* ---- the pool torch allocates from (helios.torch.memory_pool) -------------- */
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
    pthread_once(&once, load);
    if (load_error[0]) return hl_fail(err, HL_ERR_UNSUPPORTED, "%s", load_error);
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
