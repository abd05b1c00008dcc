/* errors.c — the exception tree and status -> exception mapping. */
#include "binding.h"

static PyObject *new_exc(PyObject *module, const char *name, const char *doc, PyObject *bases) {
    PyObject *exc = PyErr_NewExceptionWithDoc(name, doc, bases, NULL);
    if (!exc) return NULL;
    const char *dot = strrchr(name, '.');
    if (PyModule_AddObjectRef(module, dot + 1, exc) < 0) {
        Py_DECREF(exc);
        return NULL;
    }
    return exc;
}

/* The core asks this about every 50 ms while it waits for the GPU with the GIL
 * released. Signals are handled in the main thread only: there Python's handlers run,
 * and an exception one raises (KeyboardInterrupt) ends the wait and stays set for the
 * call to return. Any other thread (torch's autograd workers) is answered at once,
 * without the GIL, which another thread may hold while it waits for this one. */
static unsigned long main_thread;

static int python_interrupt_check(void) {
    if (PyThread_get_thread_ident() != main_thread) return 0;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = PyErr_CheckSignals() < 0;
    PyGILState_Release(g);
    return stop;
}

int errors_init(PyObject *module, module_state *st) {
    PyObject *b;
    main_thread = PyThread_get_thread_ident(); /* where `import helios` ran, normally the main thread */
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *main = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
    PyObject *ident = main ? PyObject_GetAttrString(main, "ident") : NULL;
    if (ident && PyLong_Check(ident)) main_thread = PyLong_AsUnsignedLong(ident);
    Py_XDECREF(ident);
    Py_XDECREF(main);
    Py_XDECREF(threading);
    if (PyErr_Occurred()) return -1;
    hl_set_interrupt_check(python_interrupt_check);
    st->HeliosError =
        new_exc(module, "helios.HeliosError", "Base of Helios's errors; Vulkan failures name the call and VkResult.",
                PyExc_RuntimeError);
    if (!st->HeliosError) return -1;
#define SUB(field, name, doc, other)                                                                                   \
    b = (other) ? PyTuple_Pack(2, st->HeliosError, (other)) : PyTuple_Pack(1, st->HeliosError);                        \
    if (!b) return -1;                                                                                                 \
    st->field = new_exc(module, name, doc, b);                                                                         \
    Py_DECREF(b);                                                                                                      \
    if (!st->field) return -1;
    SUB(DeviceMemoryError, "helios.DeviceMemoryError", "The problem does not fit the device's memory or buffer limits.",
        PyExc_MemoryError)
    SUB(UnsupportedError, "helios.UnsupportedError",
        "A valid request this device or build cannot serve (variant, dtype, feature).", PyExc_NotImplementedError)
    SUB(DeviceLostError, "helios.DeviceLostError",
        "The Vulkan device was lost (VK_ERROR_DEVICE_LOST); open a new Device.", NULL)
    SUB(NoDeviceError, "helios.NoDeviceError", "No usable Vulkan device (no driver, or the index is out of range).",
        NULL)
    SUB(DeviceClosedError, "helios.DeviceClosedError", "The Device was closed; open a new one.", PyExc_ValueError)
#undef SUB
    return 0;
}

/* Read when a device opens (waits need one), not at import: a bad value is then the
   switch layer's ValueError from Device(), never an import that fails. */
int errors_read_interrupt_switch(module_state *st) {
    int off = 0;
    hl_error err = {0};
    if (hl_env_flag("HELIOS_DISABLE_INTERRUPT", &off, &err) != HL_OK) {
        raise_status(st, &err);
        return -1;
    }
    hl_set_interrupt_check(off ? NULL : python_interrupt_check);
    return 0;
}

PyObject *raise_status(module_state *st, const hl_error *err) {
    PyObject *type;
    if (err->code == HL_ERR_INTERRUPTED) { /* a signal handler's exception, set while the call waited */
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyboardInterrupt, err->message);
        return NULL;
    }
    switch (err->code) {
        case HL_ERR_INVALID_ARGUMENT:
        case HL_ERR_INVALID_VARIANT:
            type = PyExc_ValueError;
            break;
        case HL_ERR_NO_DEVICE:
        case HL_ERR_DEVICE_INDEX:
            type = st->NoDeviceError;
            break;
        case HL_ERR_DEVICE_CLOSED:
            type = st->DeviceClosedError;
            break;
        case HL_ERR_DEVICE_LOST:
            type = st->DeviceLostError;
            break;
        case HL_ERR_OUT_OF_MEMORY:
        case HL_ERR_TOO_LARGE:
            type = st->DeviceMemoryError;
            break;
        case HL_ERR_UNSUPPORTED:
        case HL_ERR_UNSUPPORTED_VARIANT:
        case HL_ERR_UNSUPPORTED_DTYPE:
            type = st->UnsupportedError;
            break;
        default:
            type = st->HeliosError;
            break;
    }
    PyObject *exc = PyObject_CallFunction(type, "s", err->message);
    if (!exc) return NULL;
    /* Machine-readable detail for the Helios exceptions. */
    if (PyObject_IsSubclass(type, st->HeliosError) == 1) {
        PyObject *name = PyUnicode_FromString(hl_status_name(err->code));
        PyObject *vk = err->vk_result ? PyUnicode_FromString(hl_vk_result_name(err->vk_result)) : Py_NewRef(Py_None);
        if (name) PyObject_SetAttrString(exc, "status", name);
        if (vk) PyObject_SetAttrString(exc, "vk_result", vk);
        Py_XDECREF(name);
        Py_XDECREF(vk);
    }
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}
