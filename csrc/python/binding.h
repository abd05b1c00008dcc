/* binding.h — what the binding's files share: module state and error mapping. */
#ifndef HELIOS_BINDING_H
#define HELIOS_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../core/helios_core.h"

typedef struct module_state {
    PyObject *HeliosError, *DeviceMemoryError, *UnsupportedError, *DeviceLostError,
        *NoDeviceError, *DeviceClosedError;
    PyTypeObject *DeviceType;
} module_state;

module_state *state_from_module(PyObject *module);
module_state *state_from_type(PyTypeObject *type);

/* Raises the exception matching err->code; returns NULL for `return raise_status(...)`. */
PyObject *raise_status(module_state *st, const hl_error *err);
int errors_init(PyObject *module, module_state *st);

int device_type_init(PyObject *module, module_state *st);

#endif
