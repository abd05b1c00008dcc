/* tensor_type.c — helios._helios.Tensor: a device-resident buffer. The Python
 * subclass helios.Tensor keeps shape, dtype and row pitch; this type only owns
 * the memory, its Device (a strong reference) and the raw transfers. */
#include "binding.h"

static module_state *tensor_state(TensorObject *self) { return state_from_type(Py_TYPE(self)); }

int is_tensor(module_state *st, PyObject *obj) { return PyObject_TypeCheck(obj, st->TensorType); }

/* Tensor(device, nbytes, exportable=False, cuda_segment=0): cuda_segment > 0
 * imports that segment of the CUDA pool (cuda_pool_lookup) with no copy instead
 * of allocating (nbytes is then ignored: the tensor spans the segment). */
static PyObject *Tensor_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"device", "nbytes", "exportable", "cuda_segment", NULL};
    PyObject *devo;
    long long nbytes;
    int exportable = 0;
    unsigned long long segment = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OL|pK:Tensor", kwlist, &devo, &nbytes, &exportable, &segment))
        return NULL;
    module_state *st = state_from_type(type);
    if (!PyObject_TypeCheck(devo, st->DeviceType)) {
        PyErr_Format(PyExc_TypeError, "Tensor: device must be a helios.Device, not %.80s", Py_TYPE(devo)->tp_name);
        return NULL;
    }
    if (nbytes < 1) {
        PyErr_Format(PyExc_ValueError, "Tensor: nbytes must be >= 1, got %lld", nbytes);
        return NULL;
    }
    DeviceObject *dev = (DeviceObject *)devo;
    TensorObject *self = (TensorObject *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    if (device_acquire(dev) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    hl_error err = {0};
    hl_status s;
    Py_BEGIN_ALLOW_THREADS s = segment      ? hl_tensor_import_cuda_segment(dev->dev, segment, &self->t, &err)
                               : exportable ? hl_tensor_create_exportable(dev->dev, (uint64_t)nbytes, &self->t, &err)
                                            : hl_tensor_create(dev->dev, (uint64_t)nbytes, &self->t, &err);
    Py_END_ALLOW_THREADS device_release(dev);
    if (s != HL_OK) {
        Py_DECREF(self);
        return raise_status(st, &err);
    }
    self->device = (DeviceObject *)Py_NewRef(devo);
    return (PyObject *)self;
}

/* _view(base): a Tensor of the same subclass sharing base's memory (the Python
 * layer gives it its own shape, strides flags and dtype). */
static PyObject *Tensor_view(TensorObject *self, PyObject *unused) {
    if (!self->t) {
        PyErr_SetString(tensor_state(self)->DeviceClosedError, "the Tensor has no memory");
        return NULL;
    }
    PyTypeObject *type = Py_TYPE(self);
    TensorObject *v = (TensorObject *)type->tp_alloc(type, 0);
    if (!v) return NULL;
    v->t = self->t;                        /* the same memory (and offset, for a slice) */
    v->base = Py_NewRef((PyObject *)self); /* which keeps whatever owns it alive */
    v->device = (DeviceObject *)Py_XNewRef((PyObject *)self->device);
    return (PyObject *)v;
}

static void Tensor_dealloc(TensorObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->base && !self->owns_view) { /* a shared view: the base owns the memory */
        self->t = NULL;
    }
    if (self->t) {
        /* The device lock orders this with calls in flight on other threads. */
        DeviceObject *dev = self->device;
        if (dev && dev->lock) {
            device_lock_wait(dev);
            hl_tensor_destroy(self->t);
            PyThread_release_lock(dev->lock);
        } else {
            hl_tensor_destroy(self->t);
        }
        self->t = NULL;
    }
    Py_CLEAR(self->base); /* after the view is destroyed: its owner outlives it */
    Py_CLEAR(self->device);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int Tensor_traverse(TensorObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->device);
    Py_VISIT(self->base);
    return 0;
}

/* Locks the device and checks that the tensor's memory still exists. */
static int tensor_acquire(TensorObject *self) {
    if (!self->t || !self->device) {
        PyErr_SetString(tensor_state(self)->DeviceClosedError, "the Tensor has no memory");
        return -1;
    }
    if (device_acquire(self->device) < 0) return -1;
    if (!hl_tensor_alive(self->t)) {
        device_release(self->device);
        PyErr_SetString(tensor_state(self)->DeviceClosedError, "the Tensor's Device is closed");
        return -1;
    }
    return 0;
}

/* _reimport(): a new Tensor of the same subclass over this exportable Tensor's memory,
 * through an opaque-fd export and import (test-only: the import path without CUDA). */
static PyObject *Tensor_reimport(TensorObject *self, PyObject *unused) {
    if (tensor_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_tensor *t = NULL;
    hl_status s = hl_tensor_reimport(self->t, &t, &err);
    device_release(self->device);
    if (s != HL_OK) return raise_status(tensor_state(self), &err);
    PyTypeObject *type = Py_TYPE(self);
    TensorObject *v = (TensorObject *)type->tp_alloc(type, 0);
    if (!v) {
        device_lock_wait(self->device);
        hl_tensor_destroy(t);
        PyThread_release_lock(self->device->lock);
        return NULL;
    }
    v->t = t;
    v->device = (DeviceObject *)Py_XNewRef((PyObject *)self->device);
    return (PyObject *)v;
}

/* _slice(offset, nbytes): a Tensor of the same subclass over bytes [offset,
 * offset + nbytes) of this one's memory (a core view: operands only). */
static PyObject *Tensor_slice(TensorObject *self, PyObject *args) {
    long long offset, nbytes;
    if (!PyArg_ParseTuple(args, "LL:_slice", &offset, &nbytes)) return NULL;
    if (offset < 0 || nbytes < 1) return PyErr_Format(PyExc_ValueError, "_slice: offset >= 0 and nbytes >= 1");
    if (tensor_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_tensor *view = NULL;
    hl_status s = hl_tensor_view(self->t, (uint64_t)offset, (uint64_t)nbytes, &view, &err);
    device_release(self->device);
    if (s != HL_OK) return raise_status(tensor_state(self), &err);
    PyTypeObject *type = Py_TYPE(self);
    TensorObject *v = (TensorObject *)type->tp_alloc(type, 0);
    if (!v) {
        hl_tensor_destroy(view);
        return NULL;
    }
    v->t = view;
    v->owns_view = 1;
    v->base = Py_NewRef((PyObject *)self);
    v->device = (DeviceObject *)Py_XNewRef((PyObject *)self->device);
    return (PyObject *)v;
}

/* The transfer behind _write(offset, buffer) (a contiguous buffer's bytes into the
 * tensor) and _read(offset, buffer) (fills a writable contiguous buffer). */
static PyObject *transfer(TensorObject *self, PyObject *args, int write) {
    long long offset;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, write ? "Ly*:_write" : "Lw*:_read", &offset, &view)) return NULL;
    if (offset < 0) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "%s: offset must be >= 0", write ? "_write" : "_read");
        return NULL;
    }
    if (tensor_acquire(self) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    hl_error err = {0};
    hl_status s;
    Py_BEGIN_ALLOW_THREADS s = write ? hl_tensor_write(self->t, (uint64_t)offset, view.buf, (uint64_t)view.len, &err)
                                     : hl_tensor_read(self->t, (uint64_t)offset, view.buf, (uint64_t)view.len, &err);
    Py_END_ALLOW_THREADS device_release(self->device);
    PyBuffer_Release(&view);
    if (s != HL_OK) return raise_status(tensor_state(self), &err);
    Py_RETURN_NONE;
}

static PyObject *Tensor_write(TensorObject *self, PyObject *args) { return transfer(self, args, 1); }
static PyObject *Tensor_read(TensorObject *self, PyObject *args) { return transfer(self, args, 0); }

static PyObject *Tensor_nbytes(TensorObject *self, void *c) {
    return PyLong_FromUnsignedLongLong(hl_tensor_bytes(self->t));
}
static PyObject *Tensor_device(TensorObject *self, void *c) {
    return Py_NewRef(self->device ? (PyObject *)self->device : Py_None);
}
static PyObject *Tensor_alive(TensorObject *self, void *c) { return PyBool_FromLong(hl_tensor_alive(self->t)); }
static PyObject *Tensor_exports(TensorObject *self, void *c) {
    return PyLong_FromUnsignedLongLong(hl_tensor_exports(self->t));
}
static PyObject *Tensor_exportable(TensorObject *self, void *c) {
    return PyBool_FromLong(hl_tensor_exportable(self->t));
}

static PyMethodDef Tensor_methods[] = {
    {"_write", (PyCFunction)Tensor_write, METH_VARARGS, "Low-level: copy a buffer's bytes in at offset."},
    {"_reimport", (PyCFunction)Tensor_reimport, METH_NOARGS,
     "Test-only: a new Tensor over this exportable Tensor's memory, through an opaque-fd export and import."},
    {"_read", (PyCFunction)Tensor_read, METH_VARARGS, "Low-level: fill a writable buffer from offset."},
    {"_view", (PyCFunction)Tensor_view, METH_NOARGS, "Low-level: a Tensor sharing this one's memory."},
    {"_slice", (PyCFunction)Tensor_slice, METH_VARARGS,
     "Low-level: a Tensor over nbytes of this one's memory from offset (an operand, never an output)."},
    {"_dlpack", (PyCFunction)Tensor_dlpack, METH_VARARGS,
     "Low-level: a DLPack capsule over the tensor's CUDA mapping (shape, dtype code, bits)."},
    {"_cuda_device", (PyCFunction)Tensor_cuda_device, METH_NOARGS,
     "Low-level: the CUDA ordinal of the tensor's device; BufferError without CUDA interop."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Tensor_getset[] = {
    {"nbytes", (getter)Tensor_nbytes, NULL, "Bytes of device memory the tensor holds.", NULL},
    {"device", (getter)Tensor_device, NULL, "The Device the memory belongs to.", NULL},
    {"alive", (getter)Tensor_alive, NULL, "False once the Device closed (the memory is gone).", NULL},
    {"exportable", (getter)Tensor_exportable, NULL, "True when CUDA can map the memory (DLPack export).", NULL},
    {"exports", (getter)Tensor_exports, NULL, "DLPack exports of this memory a consumer still holds.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Tensor_slots[] = {
    {Py_tp_new, Tensor_new},
    {Py_tp_dealloc, Tensor_dealloc},
    {Py_tp_traverse, Tensor_traverse},
    {Py_tp_methods, Tensor_methods},
    {Py_tp_getset, Tensor_getset},
    {Py_tp_doc, "Tensor(device, nbytes): device-local memory (use helios.Device.upload / empty)."},
    {0, NULL},
};

static PyType_Spec Tensor_spec = {
    .name = "helios._helios.Tensor",
    .basicsize = sizeof(TensorObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = Tensor_slots,
};

int tensor_type_init(PyObject *module, module_state *st) {
    st->TensorType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &Tensor_spec, NULL);
    if (!st->TensorType) return -1;
    return PyModule_AddType(module, st->TensorType);
}
