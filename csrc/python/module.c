/* module.c — the _helios extension module: state, exceptions, free functions. */
#define PY_ARRAY_UNIQUE_SYMBOL helios_ARRAY_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include "binding.h"

#include <numpy/arrayobject.h>

static struct PyModuleDef helios_module;

module_state *state_from_module(PyObject *module) { return (module_state *)PyModule_GetState(module); }

module_state *state_from_type(PyTypeObject *type) {
    PyObject *m = PyType_GetModuleByDef(type, &helios_module);
    return m ? state_from_module(m) : NULL;
}

static PyObject *device_count(PyObject *module, PyObject *unused) {
    uint32_t n = 0;
    hl_error err = {0};
    hl_status s;
    Py_BEGIN_ALLOW_THREADS s = hl_device_count(&n, &err);
    Py_END_ALLOW_THREADS if (s != HL_OK) return raise_status(state_from_module(module), &err);
    return PyLong_FromUnsignedLong(n);
}

static PyObject *canonical_variant(PyObject *module, PyObject *arg) {
    const char *s = text_arg(arg, "variant");
    if (!s) return NULL;
    hl_variant v;
    hl_error err = {0};
    if (hl_variant_parse(s, &v, &err) != HL_OK) return raise_status(state_from_module(module), &err);
    char buf[HL_VARIANT_STR_MAX];
    hl_variant_format(&v, buf, sizeof buf);
    return PyUnicode_FromString(buf);
}

/* variant_fields(s): the parsed variant as a dict, so Python reads fields, never
 * the string's grammar. */
static PyObject *variant_fields(PyObject *module, PyObject *arg) {
    const char *s = text_arg(arg, "variant");
    if (!s) return NULL;
    hl_variant v;
    hl_error err = {0};
    if (hl_variant_parse(s, &v, &err) != HL_OK) return raise_status(state_from_module(module), &err);
    static const char *const paths[] = {"scalar", "coop", "coop2"};
    return Py_BuildValue("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:s,s:I,s:I,s:I,s:I}", "path", paths[v.path], "tm",
                         v.tm, "tn", v.tn, "tk", v.tk, "bm", v.bm, "bn", v.bn, "bk", v.bk, "sg_m", v.sg_m, "sg_n",
                         v.sg_n, "acc", hl_dtype_name(v.acc), "load", v.direct_load ? "direct" : "shared", "stages",
                         v.stages, "splitk", v.splitk, "raster", v.raster, "threads", v.threads);
}

static PyObject *fault_count(PyObject *module, PyObject *arg) {
    const char *kind = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!kind) return PyErr_Format(PyExc_TypeError, "kind must be a str");
    return PyLong_FromUnsignedLong(hl_fault_count(kind));
}

static PyMethodDef module_methods[] = {
    {"_fault_count", fault_count, METH_O,
     "Test-only: calls of a fault-injection kind seen under the current HELIOS_FAULT setting."},
    {"device_count", device_count, METH_NOARGS,
     "Number of Vulkan physical devices: 0 without a Vulkan loader or driver (opening a Device then "
     "raises NoDeviceError naming what to install)."},
    {"variant_fields", variant_fields, METH_O,
     "The fields of a variant string as a dict (path, tm, tn, tk, bm, bn, bk, sg_m, sg_n, acc, load, stages, "
     "splitk, raster, threads); ValueError if malformed."},
    {"canonical_variant", canonical_variant, METH_O,
     "Parse a variant string and return its canonical form (ValueError if malformed)."},
    {NULL}};

static int module_exec(PyObject *module) {
    if (_import_array() < 0) return -1;
    module_state *st = state_from_module(module);
    if (errors_init(module, st) < 0) return -1;
    if (device_type_init(module, st) < 0) return -1;
    if (tensor_type_init(module, st) < 0) return -1;
    /* The core's limits, defined once in helios_core.h. */
    if (PyModule_AddIntConstant(module, "MAX_LAUNCHES", (long)HL_MAX_LAUNCHES) < 0) return -1;
    PyObject *lim = PyLong_FromUnsignedLongLong(HL_MAX_OPERAND_ELEMENTS);
    if (!lim) return -1;
    int rc = PyModule_AddObjectRef(module, "MAX_OPERAND_ELEMENTS", lim);
    Py_DECREF(lim);
    if (rc < 0) return -1;
    if (PyModule_AddStringConstant(module, "BUILD_COMMIT", HELIOS_BUILD_COMMIT) < 0) return -1;
    return 0;
}

static int module_traverse(PyObject *module, visitproc visit, void *arg) {
    module_state *st = state_from_module(module);
    Py_VISIT(st->HeliosError);
    Py_VISIT(st->DeviceMemoryError);
    Py_VISIT(st->UnsupportedError);
    Py_VISIT(st->DeviceLostError);
    Py_VISIT(st->NoDeviceError);
    Py_VISIT(st->DeviceClosedError);
    Py_VISIT(st->DeviceType);
    Py_VISIT(st->TensorType);
    return 0;
}

static int module_clear(PyObject *module) {
    module_state *st = state_from_module(module);
    Py_CLEAR(st->HeliosError);
    Py_CLEAR(st->DeviceMemoryError);
    Py_CLEAR(st->UnsupportedError);
    Py_CLEAR(st->DeviceLostError);
    Py_CLEAR(st->NoDeviceError);
    Py_CLEAR(st->DeviceClosedError);
    Py_CLEAR(st->DeviceType);
    Py_CLEAR(st->TensorType);
    return 0;
}

static void module_free(void *module) { module_clear((PyObject *)module); }

static PyModuleDef_Slot module_slots[] = {{Py_mod_exec, module_exec}, {0, NULL}};

static struct PyModuleDef helios_module = {PyModuleDef_HEAD_INIT,
                                           .m_name = "helios._helios",
                                           .m_doc = "Helios's C engine: Vulkan cooperative-matrix matmul.",
                                           .m_size = sizeof(module_state),
                                           .m_methods = module_methods,
                                           .m_slots = module_slots,
                                           .m_traverse = module_traverse,
                                           .m_clear = module_clear,
                                           .m_free = module_free};

PyMODINIT_FUNC PyInit__helios(void) { return PyModuleDef_Init(&helios_module); }
