/* testing.c — helios._helios.testing: what tests drive and no product code calls,
 * kept out of Device's method table. The host stands in for a CUDA stream in the
 * ordering protocol (devices without CUDA): async_host opens the ring over the
 * device's own timeline semaphore, host_signal and host_wait are the stream's
 * signal and wait. kernels: the build's SPIR-V, which tests hold to the tables. */
#include "../core/helios_kernels.h"
#include "../core/helios_plan.h"
#include "binding.h"
#include "../core/helios_ordering.h"

static DeviceObject *device_arg(PyObject *obj) {
    PyTypeObject *type = Py_TYPE(obj);
    module_state *st = state_from_type(type);
    if (!st || !PyObject_TypeCheck(obj, st->DeviceType)) {
        PyErr_Format(PyExc_TypeError, "expected a helios Device, not %.80s", type->tp_name);
        return NULL;
    }
    return (DeviceObject *)obj;
}

/* async_host(device): opens the ring over the device's own timeline semaphore. */
static PyObject *async_host(PyObject *module, PyObject *arg) {
    DeviceObject *self = device_arg(arg);
    if (!self || device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status st;
    Py_BEGIN_ALLOW_THREADS st = hl_async_open_host(self->dev, &err);
    Py_END_ALLOW_THREADS device_release(self);
    if (st != HL_OK) return raise_status(state_from_type(Py_TYPE(self)), &err);
    Py_RETURN_NONE;
}

/* host_signal(device, value): the host signals the ordering semaphore, as a CUDA stream would. */
static PyObject *host_signal(PyObject *module, PyObject *args) {
    PyObject *obj;
    unsigned long long value;
    if (!PyArg_ParseTuple(args, "OK:host_signal", &obj, &value)) return NULL;
    DeviceObject *self = device_arg(obj);
    if (!self || device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status st;
    Py_BEGIN_ALLOW_THREADS st = hl_device_host_signal(self->dev, value, &err);
    Py_END_ALLOW_THREADS device_release(self);
    if (st != HL_OK) return raise_status(state_from_type(Py_TYPE(self)), &err);
    Py_RETURN_NONE;
}

/* host_wait(device, value, timeout_ns): until the ordering semaphore reaches value. */
static PyObject *host_wait(PyObject *module, PyObject *args) {
    PyObject *obj;
    unsigned long long value, timeout_ns;
    if (!PyArg_ParseTuple(args, "OKK:host_wait", &obj, &value, &timeout_ns)) return NULL;
    DeviceObject *self = device_arg(obj);
    if (!self || device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status st;
    Py_BEGIN_ALLOW_THREADS st = hl_device_host_wait(self->dev, value, timeout_ns, &err);
    Py_END_ALLOW_THREADS device_release(self);
    if (st != HL_OK) return raise_status(state_from_type(Py_TYPE(self)), &err);
    Py_RETURN_NONE;
}

/* kernels(): {name: SPIR-V bytes, or None where the build lacks the permutation}. */
static PyObject *kernels(PyObject *module, PyObject *unused) {
    PyObject *out = PyDict_New();
    const char *name;
    const uint32_t *code;
    size_t bytes;
    for (uint32_t i = 0; out && hl_kernel_spirv(i, &name, &code, &bytes); i++) {
        PyObject *v = code ? PyBytes_FromStringAndSize((const char *)code, (Py_ssize_t)bytes) : Py_NewRef(Py_None);
        if (!v || PyDict_SetItemString(out, name, v) < 0) Py_CLEAR(out);
        Py_XDECREF(v);
    }
    return out;
}

/* resident_grid(grid, sm_count, registers): hl_plan_resident_grid, the run's grid the
 * registers allow. */
static PyObject *resident_grid(PyObject *module, PyObject *args) {
    unsigned int grid, sms, regs;
    if (!PyArg_ParseTuple(args, "III:resident_grid", &grid, &sms, &regs)) return NULL;
    return PyLong_FromUnsignedLong(hl_plan_resident_grid(grid, sms, regs));
}

static PyMethodDef testing_methods[] = {
    {"kernels", kernels, METH_NOARGS,
     "kernels(): {name: SPIR-V bytes, or None where the build lacks the permutation} for every kernel permutation."},
    {"async_host", async_host, METH_O,
     "async_host(device): order the device's operations through its own timeline semaphore, the host standing "
     "in for the CUDA stream (host_signal, host_wait)."},
    {"host_signal", host_signal, METH_VARARGS,
     "host_signal(device, value): the host signals the ordering semaphore (as a CUDA stream would)."},
    {"host_wait", host_wait, METH_VARARGS,
     "host_wait(device, value, timeout_ns): wait until the ordering semaphore reaches value."},
    {"resident_grid", resident_grid, METH_VARARGS,
     "resident_grid(grid, sm_count, registers): a persistent run's grid where its kernel takes that many registers "
     "a thread (0: unknown)."},
    {NULL}};

int testing_init(PyObject *module) {
    PyObject *sub = PyModule_New("helios._helios.testing");
    if (!sub) return -1;
    if (PyModule_AddFunctions(sub, testing_methods) < 0 || PyModule_AddObjectRef(module, "testing", sub) < 0) {
        Py_DECREF(sub);
        return -1;
    }
    Py_DECREF(sub);
    return 0;
}
