/* capture_type.c — helios._helios.Capture: a capture (the core's helios_capture.h),
 * holding its Device and every Tensor its operations bind (so they outlive it), and
 * the Device methods that record one: _capture_begin, _capture_end, _capture_abort. */
#include "binding.h"

#include "../core/helios_capture.h"

typedef struct {
    PyObject_HEAD DeviceObject *device;
    hl_capture *c;
    PyObject *tensors; /* every Tensor an operation bound while it recorded */
} CaptureObject;

static module_state *capture_state(CaptureObject *self) { return state_from_type(Py_TYPE(self)); }

static PyObject *device_call(DeviceObject *self, hl_status (*fn)(hl_device *, hl_error *)) {
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status s = fn(self->dev, &err);
    device_release(self);
    if (s != HL_OK) return raise_status(state_from_type(Py_TYPE(self)), &err);
    Py_RETURN_NONE;
}

PyObject *Device_capture_begin(DeviceObject *self, PyObject *unused) {
    PyObject *keep = PyList_New(0);
    if (!keep) return NULL;
    PyObject *r = device_call(self, hl_capture_begin);
    if (r)
        Py_XSETREF(self->capture_keep, keep);
    else
        Py_DECREF(keep);
    return r;
}

PyObject *Device_capture_abort(DeviceObject *self, PyObject *unused) {
    if (self->dev) {
        device_lock_wait(self);
        hl_capture_abort(self->dev);
        PyThread_release_lock(self->lock);
    }
    Py_CLEAR(self->capture_keep);
    Py_RETURN_NONE;
}

PyObject *Device_capture_end(DeviceObject *self, PyObject *unused) {
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_capture *c = NULL;
    hl_status s = hl_capture_end(self->dev, &c, &err);
    device_release(self);
    PyObject *keep = self->capture_keep;
    self->capture_keep = NULL;
    if (s != HL_OK) {
        Py_XDECREF(keep);
        return raise_status(state_from_type(Py_TYPE(self)), &err);
    }
    CaptureObject *obj = PyObject_GC_New(CaptureObject, state_from_type(Py_TYPE(self))->CaptureType);
    if (!obj) {
        Py_XDECREF(keep);
        device_lock_wait(self);
        hl_capture_destroy(c);
        PyThread_release_lock(self->lock);
        return NULL;
    }
    obj->device = (DeviceObject *)Py_NewRef((PyObject *)self);
    obj->c = c;
    obj->tensors = keep ? keep : PyList_New(0);
    PyObject_GC_Track(obj);
    return (PyObject *)obj;
}

static void destroy(CaptureObject *self) {
    if (!self->c) return;
    DeviceObject *dev = self->device;
    if (dev && dev->lock) {
        device_lock_wait(dev);
        hl_capture_destroy(self->c);
        PyThread_release_lock(dev->lock);
    } else {
        hl_capture_destroy(self->c);
    }
    self->c = NULL;
}

static void Capture_dealloc(CaptureObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    destroy(self);
    Py_CLEAR(self->tensors);
    Py_CLEAR(self->device);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int Capture_traverse(CaptureObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->device);
    Py_VISIT(self->tensors);
    return 0;
}

/* The capture, open and its device alive: 0, or -1 with the exception set. */
static int usable(CaptureObject *self) {
    if (!self->c) {
        PyErr_SetString(PyExc_ValueError, "the capture is closed");
        return -1;
    }
    if (!hl_capture_alive(self->c) || !self->device->dev) {
        PyErr_SetString(capture_state(self)->DeviceClosedError, "the capture's Device is closed");
        return -1;
    }
    return 0;
}

/* replay() -> (host_ms, wall_ms, gpu_ms) */
static PyObject *Capture_replay(CaptureObject *self, PyObject *unused) {
    if (usable(self) < 0 || device_acquire(self->device) < 0) return NULL;
    hl_error err = {0};
    hl_plan_run run = {0};
    hl_status s;
    Py_BEGIN_ALLOW_THREADS s = hl_capture_replay(self->c, &run, &err);
    Py_END_ALLOW_THREADS device_release(self->device);
    if (s != HL_OK) return raise_status(capture_state(self), &err);
    return Py_BuildValue("(ddd)", run.host_ms, run.wall_ms, run.gpu_ms);
}

/* submit(wait, signal): one replay ordered on the device's timeline, not waited for. */
static PyObject *Capture_submit(CaptureObject *self, PyObject *args) {
    unsigned long long wait_value, signal_value;
    if (!PyArg_ParseTuple(args, "KK:submit", &wait_value, &signal_value) || usable(self) < 0 ||
        device_acquire(self->device) < 0)
        return NULL;
    hl_error err = {0};
    hl_status s;
    Py_BEGIN_ALLOW_THREADS s = hl_capture_submit(self->c, wait_value, signal_value, &err);
    Py_END_ALLOW_THREADS device_release(self->device);
    if (s != HL_OK) return raise_status(capture_state(self), &err);
    Py_RETURN_NONE;
}

/* gpu_ms() -> the last finished replay's GPU time (waits for it). */
static PyObject *Capture_gpu_ms(CaptureObject *self, PyObject *unused) {
    if (usable(self) < 0 || device_acquire(self->device) < 0) return NULL;
    hl_error err = {0};
    double ms = 0.0;
    hl_status s;
    Py_BEGIN_ALLOW_THREADS s = hl_capture_gpu_ms(self->c, &ms, &err);
    Py_END_ALLOW_THREADS device_release(self->device);
    if (s != HL_OK) return raise_status(capture_state(self), &err);
    return PyFloat_FromDouble(ms);
}

static PyObject *Capture_close(CaptureObject *self, PyObject *unused) {
    destroy(self);
    Py_RETURN_NONE;
}

/* counts -> (ops, dispatches, barriers) as recorded */
static PyObject *Capture_counts(CaptureObject *self, void *c) {
    if (!self->c) Py_RETURN_NONE;
    uint32_t ops, dispatches, barriers;
    hl_capture_counts(self->c, &ops, &dispatches, &barriers);
    return Py_BuildValue("(III)", ops, dispatches, barriers);
}

static PyObject *Capture_alive(CaptureObject *self, void *c) {
    return PyBool_FromLong(self->c && hl_capture_alive(self->c));
}

static PyMethodDef Capture_methods[] = {
    {"replay", (PyCFunction)Capture_replay, METH_NOARGS,
     "replay() -> (host_ms, wall_ms, gpu_ms): submit the recorded command buffer once and wait."},
    {"submit", (PyCFunction)Capture_submit, METH_VARARGS,
     "submit(wait, signal): one replay after the device's timeline reaches wait, signalling signal; no wait."},
    {"gpu_ms", (PyCFunction)Capture_gpu_ms, METH_NOARGS,
     "gpu_ms() -> float: the last finished replay's GPU time (waits for it; 0.0 without timestamps)."},
    {"close", (PyCFunction)Capture_close, METH_NOARGS, "Release the capture's command buffer, sets and buffers."},
    {NULL}};

static PyGetSetDef Capture_getset[] = {
    {"counts", (getter)Capture_counts, NULL, "(ops, dispatches, barriers) as recorded; None once closed", NULL},
    {"alive", (getter)Capture_alive, NULL, "False once closed or its Device closed", NULL},
    {NULL}};

static PyType_Slot Capture_slots[] = {
    {Py_tp_dealloc, Capture_dealloc},
    {Py_tp_traverse, Capture_traverse},
    {Py_tp_methods, Capture_methods},
    {Py_tp_getset, Capture_getset},
    {Py_tp_doc, "A capture (made by Device._capture_end): ordered operations recorded once, replayed as one "
                "submission."},
    {0, NULL},
};

static PyType_Spec Capture_spec = {
    .name = "helios._helios.Capture",
    .basicsize = sizeof(CaptureObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Capture_slots,
};

int capture_type_init(PyObject *module, module_state *st) {
    st->CaptureType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &Capture_spec, NULL);
    if (!st->CaptureType) return -1;
    return PyModule_AddType(module, st->CaptureType);
}
