/* dlpack.c — Tensor._dlpack: an exportable Tensor handed to CUDA consumers
 * (torch.from_dlpack, CuPy, JAX) as a DLPack capsule over its CUDA mapping,
 * with no copy. The capsule's manager holds a strong reference to the Tensor,
 * so the memory lives until the consumer frees its tensor; the Device refuses
 * to close while any export is outstanding. */
#include "binding.h"
#include "../core/helios_ordering.h"

/* DLPack's ABI (dlpack.h): the unversioned DLManagedTensor every consumer takes, and
 * DLPack 1.0's DLManagedTensorVersioned (a version and flags) for consumers that ask
 * for it (__dlpack__(max_version=(1, 0)) or newer). */
typedef struct {
    int32_t device_type;
    int32_t device_id;
} DLDevice;
typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
typedef struct {
    uint32_t major, minor;
} DLPackVersion;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags; /* bit 0 read-only, bit 1 copied: neither (the consumer shares writable memory) */
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
#define DL_CUDA 2
#define DL_MAX_DIMS 32

typedef struct {
    DLManagedTensor managed;            /* the unversioned export, or */
    DLManagedTensorVersioned versioned; /* the versioned one: one of the two is handed out */
    TensorObject *tensor;               /* a strong reference */
    int64_t shape[DL_MAX_DIMS];
} export_ctx;

static void release_export(export_ctx *ctx) {
    PyGILState_STATE g = PyGILState_Ensure();
    hl_tensor_export_done(ctx->tensor->t);
    Py_DECREF((PyObject *)ctx->tensor);
    PyMem_RawFree(ctx);
    PyGILState_Release(g);
}

/* Called by the consumer when it frees its tensor, from any thread. */
static void managed_deleter(DLManagedTensor *m) { release_export((export_ctx *)m->manager_ctx); }
static void versioned_deleter(DLManagedTensorVersioned *m) { release_export((export_ctx *)m->manager_ctx); }

/* A capsule no consumer took (not renamed "used_dltensor" / "used_dltensor_versioned"). */
static void capsule_destructor(PyObject *cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m && m->deleter) m->deleter(m);
    } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m && m->deleter) m->deleter(m);
    }
}

/* _dlpack(shape, code, bits, versioned=False): the capsule over this tensor's CUDA
 * mapping, packed C-order with that shape and element type (DLPack's dtype code and
 * bits); versioned: DLPack 1.0's DLManagedTensorVersioned ("dltensor_versioned"). */
PyObject *Tensor_dlpack(TensorObject *self, PyObject *args) {
    PyObject *shape;
    int code, bits, versioned = 0;
    if (!PyArg_ParseTuple(args, "O!ii|p:_dlpack", &PyTuple_Type, &shape, &code, &bits, &versioned)) return NULL;
    const Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    if (nd > DL_MAX_DIMS || bits <= 0 || bits % 8 || code < 0 || code > 255)
        return PyErr_Format(PyExc_ValueError, "_dlpack: %zd dimensions, dtype code %d, %d bits", nd, code, bits);
    module_state *st = state_from_type(Py_TYPE(self));
    export_ctx *ctx = PyMem_RawCalloc(1, sizeof *ctx);
    if (!ctx) return PyErr_NoMemory();
    uint64_t elems = 1;
    for (Py_ssize_t i = 0; i < nd; i++) {
        long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        if (d < 0) {
            PyMem_RawFree(ctx);
            return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "_dlpack: negative dimension");
        }
        ctx->shape[i] = d;
        elems *= (uint64_t)d;
    }
    if (!self->t || !self->device) {
        PyMem_RawFree(ctx);
        PyErr_SetString(st->DeviceClosedError, "the Tensor has no memory");
        return NULL;
    }
    if (elems * (uint64_t)(bits / 8) > hl_tensor_bytes(self->t)) {
        PyMem_RawFree(ctx);
        return PyErr_Format(PyExc_ValueError, "_dlpack: the shape needs more bytes than the tensor's %llu",
                            (unsigned long long)hl_tensor_bytes(self->t));
    }
    if (device_acquire(self->device) < 0) {
        PyMem_RawFree(ctx);
        return NULL;
    }
    hl_error err = {0};
    uint64_t ptr = 0;
    int ordinal = -1;
    hl_status s;
    Py_BEGIN_ALLOW_THREADS s = hl_tensor_cuda_export(self->t, &ptr, &ordinal, &err);
    Py_END_ALLOW_THREADS device_release(self->device);
    if (s != HL_OK) {
        PyMem_RawFree(ctx);
        /* Not exportable here: DLPack's consumers expect BufferError. */
        if (s == HL_ERR_UNSUPPORTED) return PyErr_Format(PyExc_BufferError, "%s", err.message);
        return raise_status(st, &err);
    }
    ctx->tensor = (TensorObject *)Py_NewRef((PyObject *)self);
    DLTensor *t = versioned ? &ctx->versioned.dl_tensor : &ctx->managed.dl_tensor;
    t->data = (void *)(uintptr_t)ptr;
    t->device = (DLDevice){DL_CUDA, ordinal};
    t->ndim = (int32_t)nd;
    t->dtype = (DLDataType){(uint8_t)code, (uint8_t)bits, 1};
    t->shape = ctx->shape;
    t->strides = NULL; /* C-contiguous */
    t->byte_offset = 0;
    if (versioned) {
        ctx->versioned.version = (DLPackVersion){1, 0};
        ctx->versioned.manager_ctx = ctx;
        ctx->versioned.deleter = versioned_deleter;
        ctx->versioned.flags = 0;
        PyObject *cap = PyCapsule_New(&ctx->versioned, "dltensor_versioned", capsule_destructor);
        if (!cap) versioned_deleter(&ctx->versioned);
        return cap;
    }
    ctx->managed.manager_ctx = ctx;
    ctx->managed.deleter = managed_deleter;
    PyObject *cap = PyCapsule_New(&ctx->managed, "dltensor", capsule_destructor);
    if (!cap) managed_deleter(&ctx->managed);
    return cap;
}

/* _cuda_device(): the CUDA ordinal of the tensor's device (by UUID); BufferError
 * where CUDA interop is not possible. */
PyObject *Tensor_cuda_device(TensorObject *self, PyObject *unused) {
    if (!self->t || !self->device || !self->device->dev) {
        PyErr_SetString(state_from_type(Py_TYPE(self))->DeviceClosedError, "the Tensor has no memory");
        return NULL;
    }
    if (device_acquire(self->device) < 0) return NULL;
    hl_error err = {0};
    int ordinal = -1;
    hl_status s;
    Py_BEGIN_ALLOW_THREADS s = hl_device_cuda_ordinal(self->device->dev, &ordinal, &err);
    Py_END_ALLOW_THREADS device_release(self->device);
    if (s != HL_OK) return PyErr_Format(PyExc_BufferError, "%s", err.message);
    return PyLong_FromLong(ordinal);
}
