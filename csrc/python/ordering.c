/* ordering.c — the Device methods that order Helios's work with CUDA's and time it
 * from inside: a CUDA stream's signal and wait on the device's shared timeline
 * semaphore (async.c), groups of ops recorded and submitted together, and the
 * engine's own per-op timestamps (profile.c). helios.torch calls them; the names
 * are private (Device._...). */
#include "binding.h"
#include "../core/helios_ordering.h"

/* ---- ordering with CUDA streams (async.c): Device._async_values(),
 * Device._cuda_signal(stream, value), Device._cuda_wait(stream, value) ---------- */
static PyObject *interop_error(DeviceObject *self, hl_status s, hl_error *err) {
    if (s == HL_ERR_UNSUPPORTED) return PyErr_Format(PyExc_BufferError, "%s", err->message);
    return raise_status(state_from_type(Py_TYPE(self)), err);
}

PyObject *Device_async_values(DeviceObject *self, PyObject *unused) {
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    uint64_t w = 0, s = 0;
    hl_status st;
    Py_BEGIN_ALLOW_THREADS st = hl_async_values(self->dev, &w, &s, &err);
    Py_END_ALLOW_THREADS device_release(self);
    if (st != HL_OK) return interop_error(self, st, &err);
    return Py_BuildValue("(KK)", (unsigned long long)w, (unsigned long long)s);
}

static PyObject *stream_call(DeviceObject *self, PyObject *args, int signal) {
    unsigned long long stream, value;
    if (!PyArg_ParseTuple(args, signal ? "KK:_cuda_signal" : "KK:_cuda_wait", &stream, &value)) return NULL;
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status st;
    Py_BEGIN_ALLOW_THREADS st = signal ? hl_device_cuda_signal(self->dev, stream, value, &err)
                                       : hl_device_cuda_wait(self->dev, stream, value, &err);
    Py_END_ALLOW_THREADS device_release(self);
    if (st != HL_OK) return interop_error(self, st, &err);
    Py_RETURN_NONE;
}

PyObject *Device_cuda_signal(DeviceObject *self, PyObject *args) { return stream_call(self, args, 1); }
PyObject *Device_cuda_wait(DeviceObject *self, PyObject *args) { return stream_call(self, args, 0); }

/* _group_begin(wait, signal): every operation until _group_end is recorded into one
 * submission that waits for `wait` and signals `signal` (hl_async_group_begin);
 * _group_end() submits it (always, also after an operation failed). */
PyObject *Device_group_begin(DeviceObject *self, PyObject *args) {
    unsigned long long wait_value, signal_value;
    if (!PyArg_ParseTuple(args, "KK:_group_begin", &wait_value, &signal_value)) return NULL;
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status st;
    Py_BEGIN_ALLOW_THREADS st = hl_async_group_begin(self->dev, wait_value, signal_value, &err);
    Py_END_ALLOW_THREADS device_release(self);
    if (st != HL_OK) return raise_status(state_from_type(Py_TYPE(self)), &err);
    Py_RETURN_NONE;
}

PyObject *Device_group_end(DeviceObject *self, PyObject *unused) {
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status st;
    Py_BEGIN_ALLOW_THREADS st = hl_async_group_end(self->dev, &err);
    Py_END_ALLOW_THREADS device_release(self);
    if (st != HL_OK) return raise_status(state_from_type(Py_TYPE(self)), &err);
    Py_RETURN_NONE;
}

/* _semaphore_value() -> the ordering semaphore's current value (host polling). */
PyObject *Device_semaphore_value(DeviceObject *self, PyObject *unused) {
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    uint64_t v = 0;
    hl_status st = hl_device_semaphore_value(self->dev, &v, &err);
    device_release(self);
    if (st != HL_OK) return raise_status(state_from_type(Py_TYPE(self)), &err);
    return PyLong_FromUnsignedLongLong(v);
}

/* _profile_start(capacity): per-op GPU timestamps of ordered work from now on. */
PyObject *Device_profile_start(DeviceObject *self, PyObject *args) {
    unsigned int capacity = 4096;
    if (!PyArg_ParseTuple(args, "|I:_profile_start", &capacity)) return NULL;
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status st = hl_profile_start(self->dev, capacity, &err);
    device_release(self);
    if (st != HL_OK) return raise_status(state_from_type(Py_TYPE(self)), &err);
    Py_RETURN_NONE;
}

/* _profile_stop() -> ([(kind, ms), ...], dropped): the timestamps in recording order. */
PyObject *Device_profile_stop(DeviceObject *self, PyObject *unused) {
    if (device_acquire(self) < 0) return NULL;
    hl_profile_entry *out = PyMem_Calloc(HL_PROFILE_MAX, sizeof *out);
    if (!out) {
        device_release(self);
        return PyErr_NoMemory();
    }
    hl_error err = {0};
    uint32_t n = 0, dropped = 0;
    hl_status st = hl_profile_stop(self->dev, out, &n, &dropped, &err);
    device_release(self);
    PyObject *list = NULL;
    if (st != HL_OK) {
        raise_status(state_from_type(Py_TYPE(self)), &err);
        goto done;
    }
    list = PyList_New(n);
    for (uint32_t i = 0; list && i < n; i++) {
        PyObject *e = Py_BuildValue("(sd)", out[i].kind == HL_PROFILE_SUBMISSION ? "submission" : "op", out[i].ms);
        if (!e) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, e);
    }
done:
    PyMem_Free(out);
    if (!list) return NULL;
    return Py_BuildValue("(NI)", list, dropped);
}
