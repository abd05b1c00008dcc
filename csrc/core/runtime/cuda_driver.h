/* cuda_driver.h — the slice of the CUDA driver API interop uses, opened at run
 * time (cuda.c loads it): the types as cuda.h declares them, one function pointer
 * per entry point, and HL_CU, which fails with the call's name and the driver's
 * name for its result. Shared by cuda.c (interop) and cuda_pool.c (the pool). */
#ifndef HELIOS_CUDA_DRIVER_H
#define HELIOS_CUDA_DRIVER_H

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

#define HL_CU_DECLARE(name, params)                                                                                    \
    typedef CUresult(*pfn_##name) params;                                                                              \
    extern pfn_##name p_##name;
HL_CU_FUNCS(HL_CU_DECLARE)
#undef HL_CU_DECLARE

/* Loads the driver library once per process: HL_OK, or HL_ERR_UNSUPPORTED saying why not. */
hl_status hl_cu_load(hl_error *err);
/* The failing call and the driver's name for its result. */
hl_status hl_cu_fail(hl_error *err, CUresult r, const char *call);

#define HL_CU(call)                                                                                                    \
    do {                                                                                                               \
        CUresult hl_cr_ = p_##call;                                                                                    \
        if (hl_cr_ != 0) {                                                                                             \
            st = hl_cu_fail(err, hl_cr_, #call);                                                                       \
            goto fail;                                                                                                 \
        }                                                                                                              \
    } while (0)

#endif
