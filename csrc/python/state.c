/* state.c — what every file of the binding reaches the same way: the module's state
 * (from the module or from one of its types) and a text argument. It calls nothing
 * of the binding's, so every other file may call it (no circle through module.c). */
#include "binding.h"

module_state *state_from_module(PyObject *module) { return (module_state *)PyModule_GetState(module); }

module_state *state_from_type(PyTypeObject *type) {
    PyObject *m = PyType_GetModuleByDef(type, &helios_module);
    return m ? state_from_module(m) : NULL;
}

const char *text_arg(PyObject *obj, const char *what) {
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %.80s", what, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(obj, &len);
    if (s && (size_t)len != strlen(s)) {
        PyErr_Format(PyExc_ValueError, "%s contains a NUL character", what);
        return NULL;
    }
    return s;
}
