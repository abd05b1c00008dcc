/* roof.c — Device._mma_roof: the cooperative-matrix MMA roof (core roof.c). */
#include "binding.h"

#include <string.h>

/* _mma_roof(tm, tn, tk, acc, iters, groups, warmup, reps) -> (samples_ms, flops per dispatch) */
PyObject *Device_mma_roof(DeviceObject *self, PyObject *args) {
    unsigned int tm, tn, tk, iters, groups, warmup, reps;
    const char *acc;
    if (!PyArg_ParseTuple(args, "IIIsIIII:_mma_roof", &tm, &tn, &tk, &acc, &iters, &groups, &warmup, &reps))
        return NULL;
    hl_dtype acc_t;
    if (!strcmp(acc, "f32"))
        acc_t = HL_F32;
    else if (!strcmp(acc, "f16"))
        acc_t = HL_F16;
    else
        return PyErr_Format(PyExc_ValueError, "acc must be 'f32' or 'f16', got %R", PyTuple_GET_ITEM(args, 3));
    if (!reps || reps > HL_MAX_LAUNCHES) return PyErr_Format(PyExc_ValueError, "reps must be 1..%u", HL_MAX_LAUNCHES);
    double *samples = PyMem_Calloc(reps, sizeof *samples);
    if (!samples) return PyErr_NoMemory();
    PyObject *result = NULL;
    if (device_acquire(self) == 0) {
        hl_roof_args ra = {tm, tn, tk, acc_t, iters, groups, warmup, reps, samples};
        hl_error err = {0};
        double flops = 0.0;
        hl_status s;
        Py_BEGIN_ALLOW_THREADS s = hl_mma_roof(self->dev, &ra, &flops, &err);
        Py_END_ALLOW_THREADS device_release(self);
        if (s != HL_OK) {
            raise_status(state_from_type(Py_TYPE(self)), &err);
        } else {
            PyObject *list = samples_list(samples, reps);
            if (list) result = Py_BuildValue("(Nd)", list, flops);
        }
    }
    PyMem_Free(samples);
    return result;
}
