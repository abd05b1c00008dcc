/* binding.h — what the binding's files share: module state and error mapping. */
#ifndef HELIOS_BINDING_H
#define HELIOS_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include <pythread.h>

#include "../core/runtime/grammar.h"
#include "../core/helios_attention.h"
#include "../core/helios_core.h"

typedef struct module_state {
    PyObject *HeliosError, *DeviceMemoryError, *UnsupportedError, *DeviceLostError, *NoDeviceError, *DeviceClosedError;
    PyTypeObject *DeviceType, *TensorType, *PlanType, *CaptureType;
} module_state;

/* helios._helios.Device (device_type.c). Calls on one Device, and on its
 * Tensors, are serialized by `lock`, taken without the GIL. */
typedef struct {
    PyObject_HEAD hl_device *dev;
    PyThread_type_lock lock;
    PyObject *info;         /* cached capability dict */
    PyObject *capture_keep; /* while a capture records: every Tensor its operations bind (a list) */
} DeviceObject;

/* helios._helios.Tensor (tensor_type.c): a device-resident buffer and a strong
 * reference to its Device. A view (base != NULL) shares its base's buffer, holds
 * a strong reference to the base, and never frees the memory itself. */
typedef struct {
    PyObject_HEAD DeviceObject *device;
    hl_tensor *t;
    PyObject *base;
    int owns_view; /* t is a core view made for this object (_slice): destroyed with it */
} TensorObject;

/* Takes the device lock with the GIL released; raises DeviceClosedError (and
 * returns -1) if the device is closed. */
int device_acquire(DeviceObject *self);
void device_release(DeviceObject *self);
/* Takes the lock, waiting with the GIL released; no closed check (close, dealloc). */
void device_lock_wait(DeviceObject *self);

/* state.c: the module's state; the module's definition is module.c's. */
extern struct PyModuleDef helios_module;
module_state *state_from_module(PyObject *module);
module_state *state_from_type(PyTypeObject *type);

/* Raises the exception matching err->code; returns NULL for `return raise_status(...)`. */
PyObject *raise_status(module_state *st, const hl_error *err);
int errors_init(PyObject *module, module_state *st);
/* HELIOS_DISABLE_INTERRUPT, read as a device opens: -1 with the exception set for a bad value. */
int errors_read_interrupt_switch(module_state *st);

int device_type_init(PyObject *module, module_state *st);
int tensor_type_init(PyObject *module, module_state *st);
int plan_type_init(PyObject *module, module_state *st);
int capture_type_init(PyObject *module, module_state *st); /* capture_type.c */
PyObject *Device_capture_begin(DeviceObject *self, PyObject *unused);
PyObject *Device_capture_end(DeviceObject *self, PyObject *unused);
PyObject *Device_capture_abort(DeviceObject *self, PyObject *unused);
int testing_init(PyObject *module); /* testing.c: the helios._helios.testing submodule */
struct hl_plan;
/* plan_type.c: a Plan object owning p (destroyed if it cannot be made), keeping ops alive. */
PyObject *plan_new(DeviceObject *device, struct hl_plan *p, PyObject *ops);
int is_tensor(module_state *st, PyObject *obj);

/* gemm.c: Device._gemm and Device._chain, and the product dicts a plan takes. */
PyObject *Device_gemm(DeviceObject *self, PyObject *args, PyObject *kwds);
PyObject *Device_chain(DeviceObject *self, PyObject *args, PyObject *kwds);
/* A product's dict on Tensors only (a chain's or a plan's operation i): *ma, its
 * variant kept in *variant; -1 with the exception set. */
int tensor_product_arg(DeviceObject *self, PyObject *d, const char *what, Py_ssize_t i, hl_matmul_args *ma,
                       hl_variant *variant);
/* plan_ops.c: Device._plan, and the plan operations' schema (_helios.PLAN_OPS). */
PyObject *Device_plan(DeviceObject *self, PyObject *args, PyObject *kwds);
PyObject *plan_ops_table(void);
int dtype_arg(PyObject *obj, const char *name, hl_dtype *out);
int npy_type_of(hl_dtype t); /* a host buffer's NumPy type at this level (bfloat16: uint16 bits) */
int variant_arg(DeviceObject *self, PyObject *obj, hl_variant *v, int *given);
/* The UTF-8 text of a str argument, or NULL with TypeError (not a str) or
 * ValueError (an embedded NUL: C would read only the prefix). */
const char *text_arg(PyObject *obj, const char *what);
/* A host array (C-contiguous, aligned, numpy `type`, >= need bytes) or a Tensor
 * of this Device: sets *host or *t. */
int operand_arg(DeviceObject *self, PyObject *o, const char *name, int type, uint64_t need, const void **host,
                hl_tensor **t);
PyObject *samples_list(const double *samples, uint32_t n);
/* One core call with the GIL released and the device lock held: allocates the
 * `iters` samples it points *samples_slot / *batch_slot at, and *info_slot at the
 * call's hl_run_info (all cleared again after),
 * and returns (host_out or None, samples_ms, gpu_ms, variant) or NULL with the
 * exception set. */
typedef hl_status (*timed_fn)(hl_device *dev, void *args, hl_error *err);
PyObject *timed_call(DeviceObject *self, timed_fn fn, void *args, double **samples_slot, double **batch_slot,
                     hl_run_info **info_slot, uint32_t iters, PyObject *host_out);

/* dlpack.c: Tensor._dlpack and Tensor._cuda_device (CUDA interop). */
PyObject *Tensor_dlpack(TensorObject *self, PyObject *args);
PyObject *Tensor_cuda_device(TensorObject *self, PyObject *unused);
/* elementwise.c: Device._copy_strided and Device._activation. */
PyObject *Device_copy_strided(DeviceObject *self, PyObject *args, PyObject *kwds);
PyObject *Device_activation(DeviceObject *self, PyObject *args, PyObject *kwds);
PyObject *Device_layernorm(DeviceObject *self, PyObject *args, PyObject *kwds);
PyObject *Device_layernorm_backward(DeviceObject *self, PyObject *args, PyObject *kwds);
PyObject *Device_train(DeviceObject *self, PyObject *args, PyObject *kwds);
PyObject *Device_adamw(DeviceObject *self, PyObject *args, PyObject *kwds);
/* roof.c */
PyObject *Device_mma_roof(DeviceObject *self, PyObject *args);
/* ordering.c: ordering with CUDA streams, groups, the engine's per-op timestamps. */
PyObject *Device_async_values(DeviceObject *self, PyObject *unused);
PyObject *Device_cuda_signal(DeviceObject *self, PyObject *args);
PyObject *Device_cuda_wait(DeviceObject *self, PyObject *args);
PyObject *Device_group_begin(DeviceObject *self, PyObject *args);
PyObject *Device_group_end(DeviceObject *self, PyObject *unused);
PyObject *Device_semaphore_value(DeviceObject *self, PyObject *unused);
PyObject *Device_profile_start(DeviceObject *self, PyObject *args);
PyObject *Device_profile_stop(DeviceObject *self, PyObject *unused);

/* attention.c: Device._attention and the attention variant methods. */
PyObject *Device_attention(DeviceObject *self, PyObject *args, PyObject *kwds);
PyObject *Device_attention_backward(DeviceObject *self, PyObject *args, PyObject *kwds);
PyObject *Device_attention_variants(DeviceObject *self, PyObject *args, PyObject *kwds);
PyObject *Device_attention_kernel_stats(DeviceObject *self, PyObject *args, PyObject *kwds);
/* {statistic name: value} of a pipeline's driver statistics. */
/* A kernel's machine code as the driver's pipeline cache holds it (malloc'd). */
typedef struct hl_machine_code {
    void *data;
    size_t size;
} hl_machine_code;
/* The stats as a dict; code (NULL: not asked for) becomes pipeline_cache_data and is
 * freed, on every path. */
PyObject *kernel_stats_dict(const hl_kernel_stats *ks, hl_machine_code *code);
/* Device.info (device_info.c): the capability report, built on first read. */
PyObject *Device_info(DeviceObject *self, void *closure);

#endif
