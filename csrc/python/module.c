/* module.c — the _helios extension module: its definition, initialisation and free
 * functions (its state is reached through state.c). */
#define PY_ARRAY_UNIQUE_SYMBOL helios_ARRAY_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include "binding.h"
#include "../core/helios_elementwise.h"
#include "hl_layouts.h" /* generated: the trace words' layout */

#include <numpy/arrayobject.h>

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

/* The fields of a parsed variant (any schema) as a dict: integers, and choice
 * fields (acc, load) by name; the path by its form's tag. */
static PyObject *fields_dict(const hl_schema *schema, const void *v) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    const hl_grammar *g = hl_schema_grammar(schema, v);
    for (size_t i = 0; i < schema->n_fields; i++) {
        const hl_field *f = &schema->fields[i];
        PyObject *val;
        if (f->store == HL_STORE_PATH) {
            val = PyUnicode_FromString(g ? g->tag : "?");
        } else {
            const char *name = f->store == HL_STORE_U32 ? NULL : hl_schema_choice_name(schema, v, (uint32_t)i);
            val = name ? PyUnicode_FromString(name) : PyLong_FromUnsignedLong(hl_field_get(f, v));
        }
        if (!val || PyDict_SetItemString(d, f->name, val) < 0) {
            Py_XDECREF(val);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(val);
    }
    return d;
}

/* A variant string of either kind parsed (hl_schema_parse) into its dict. */
static PyObject *parsed_fields(PyObject *module, PyObject *arg, const hl_schema *schema) {
    const char *s = text_arg(arg, "variant");
    if (!s) return NULL;
    union {
        hl_variant matmul;
        hl_attn_variant attention;
    } v;
    hl_error err = {0};
    if (hl_schema_parse(schema, s, &v, &err) != HL_OK) return raise_status(state_from_module(module), &err);
    return fields_dict(schema, &v);
}

/* variant_fields(s): the parsed variant as a dict, so Python reads fields, never
 * the string's grammar; attention_variant_fields(s) the same for attention. */
static PyObject *variant_fields(PyObject *module, PyObject *arg) {
    return parsed_fields(module, arg, &hl_variant_schema);
}

static PyObject *attention_variant_fields(PyObject *module, PyObject *arg) {
    return parsed_fields(module, arg, &hl_attn_variant_schema);
}

/* format_variant(fields): the canonical string of a matmul variant built from a
 * dict (path plus fields; fields left out take the form's defaults). */
static PyObject *format_variant(PyObject *module, PyObject *arg) {
    if (!PyDict_Check(arg))
        return PyErr_Format(PyExc_TypeError, "fields must be a dict, not %.80s", Py_TYPE(arg)->tp_name);
    PyObject *path = PyDict_GetItemString(arg, "path"); /* borrowed */
    if (!path || !PyUnicode_Check(path))
        return PyErr_Format(PyExc_ValueError, "fields need a str 'path' (e.g. 'coop')");
    enum { MAX_KEYS = 32 };
    const char *keys[MAX_KEYS], *vals[MAX_KEYS];
    PyObject *texts[MAX_KEYS]; /* str() of each value, alive until the core has read them */
    size_t n = 0;
    PyObject *k, *val, *result = NULL;
    Py_ssize_t pos = 0;
    while (PyDict_Next(arg, &pos, &k, &val)) {
        if (!PyUnicode_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "field names must be str");
            goto done;
        }
        if (PyUnicode_CompareWithASCIIString(k, "path") == 0) continue;
        if (n == MAX_KEYS) {
            PyErr_SetString(PyExc_ValueError, "too many fields");
            goto done;
        }
        if (PyBool_Check(val) || !(PyLong_Check(val) || PyUnicode_Check(val))) {
            PyErr_Format(PyExc_TypeError, "field %S must be an int or a str, not %.80s", k, Py_TYPE(val)->tp_name);
            goto done;
        }
        texts[n] = PyObject_Str(val);
        if (!texts[n]) goto done;
        keys[n] = PyUnicode_AsUTF8(k);
        vals[n] = PyUnicode_AsUTF8(texts[n]);
        n++;
        if (!keys[n - 1] || !vals[n - 1]) goto done;
    }
    const char *tag = PyUnicode_AsUTF8(path);
    if (!tag) goto done;
    hl_variant v;
    hl_error err = {0};
    if (hl_schema_build(&hl_variant_schema, tag, keys, vals, n, &v, &err) != HL_OK) {
        raise_status(state_from_module(module), &err);
        goto done;
    }
    char buf[HL_VARIANT_STR_MAX];
    hl_variant_format(&v, buf, sizeof buf);
    result = PyUnicode_FromString(buf);
done:
    for (size_t i = 0; i < n; i++) Py_DECREF(texts[i]);
    return result;
}

static PyObject *fault_count(PyObject *module, PyObject *arg) {
    const char *kind = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!kind) return PyErr_Format(PyExc_TypeError, "kind must be a str");
    return PyLong_FromUnsignedLong(hl_fault_count(kind));
}

/* ---- the CUDA pool torch allocates from (helios.torch.memory_pool) ------- */
void *helios_cuda_alloc(ssize_t size, int device, void *stream);
void helios_cuda_free(void *ptr, ssize_t size, int device, void *stream);

static PyObject *cuda_pool_lookup(PyObject *module, PyObject *args) {
    unsigned long long ptr, nbytes;
    if (!PyArg_ParseTuple(args, "KK:cuda_pool_lookup", &ptr, &nbytes)) return NULL;
    uint64_t seg, base, size;
    int device;
    if (!hl_cuda_pool_lookup(ptr, nbytes, &seg, &base, &size, &device)) Py_RETURN_NONE;
    return Py_BuildValue("(KKKi)", (unsigned long long)seg, (unsigned long long)base, (unsigned long long)size, device);
}

static PyObject *cuda_pool_usage(PyObject *module, PyObject *unused) {
    uint64_t segments, bytes;
    hl_cuda_pool_usage(&segments, &bytes);
    return Py_BuildValue("(KK)", (unsigned long long)segments, (unsigned long long)bytes);
}

/* _cuda_pool_alloc(size, device) / _cuda_pool_free(ptr): the allocator torch calls,
 * for tests and tools (MemoryError with the driver's reason where it fails). */
static PyObject *cuda_pool_alloc(PyObject *module, PyObject *args) {
    long long size;
    int device;
    if (!PyArg_ParseTuple(args, "Li:_cuda_pool_alloc", &size, &device)) return NULL;
    void *p;
    Py_BEGIN_ALLOW_THREADS p = helios_cuda_alloc((ssize_t)size, device, NULL);
    Py_END_ALLOW_THREADS if (!p) {
        PyObject *exc = state_from_module(module)->UnsupportedError;
        PyErr_Format(exc, "CUDA pool allocation of %lld bytes on CUDA device %d failed: %s", size, device,
                     hl_cuda_pool_last_error());
        return NULL;
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)p);
}

static PyObject *cuda_pool_free(PyObject *module, PyObject *arg) {
    unsigned long long ptr = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS helios_cuda_free((void *)(uintptr_t)ptr, 0, 0, NULL);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* env_flag(name) -> bool: a HELIOS_* switch parsed as the engine parses its own. */
static PyObject *env_flag(PyObject *module, PyObject *arg) {
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    int on;
    hl_error err;
    if (hl_env_flag(name, &on, &err) != HL_OK) return raise_status(state_from_module(module), &err);
    return PyBool_FromLong(on);
}

static PyObject *abandoned_devices(PyObject *module, PyObject *unused) {
    return PyLong_FromLong(hl_abandoned_devices());
}

static PyMethodDef module_methods[] = {
    {"abandoned_devices", abandoned_devices, METH_NOARGS,
     "abandoned_devices() -> int: Devices closed while the GPU still ran work whose wait a signal interrupted; "
     "their Vulkan objects are left to process exit (which then need not wait for that work)."},
    {"env_flag", env_flag, METH_O,
     "env_flag(name) -> bool: the HELIOS_* switch `name` (unset or empty: False; 1/true/yes/on, 0/false/no/off; "
     "ValueError naming it otherwise), parsed as the engine parses its own."},
    {"cuda_pool_lookup", cuda_pool_lookup, METH_VARARGS,
     "cuda_pool_lookup(ptr, nbytes) -> (segment, base, size, cuda_device) of the live segment of the CUDA pool "
     "(helios.torch.memory_pool) holding those bytes, or None."},
    {"cuda_pool_usage", cuda_pool_usage, METH_NOARGS, "(segments, bytes) the CUDA pool holds now."},
    {"_cuda_pool_alloc", cuda_pool_alloc, METH_VARARGS,
     "Low-level: _cuda_pool_alloc(size, cuda_device) -> pointer: one pool segment (what torch's allocator calls)."},
    {"_cuda_pool_free", cuda_pool_free, METH_O, "Low-level: _cuda_pool_free(ptr): release a pool segment."},
    {"_fault_count", fault_count, METH_O,
     "Test-only: calls of a fault-injection kind seen under the current HELIOS_FAULT setting."},
    {"device_count", device_count, METH_NOARGS,
     "Number of Vulkan physical devices: 0 without a Vulkan loader or driver (opening a Device then "
     "raises NoDeviceError naming what to install)."},
    {"variant_fields", variant_fields, METH_O,
     "The fields of a variant string as a dict (path, tm, tn, tk, bm, bn, bk, sg_m, sg_n, acc, load, stages, "
     "splitk, raster, threads); ValueError if malformed."},
    {"attention_variant_fields", attention_variant_fields, METH_O,
     "The fields of an attention variant string as a dict (path, tm, tn, tk, bc, nsg, wq); ValueError if "
     "malformed."},
    {"format_variant", format_variant, METH_O,
     "The canonical matmul variant string from a dict: 'path' (coop, coop2, gemv, scalar) and the fields of "
     "variant_fields(); fields left out take the form's defaults. ValueError naming an unknown or missing "
     "field."},
    {"canonical_variant", canonical_variant, METH_O,
     "Parse a variant string and return its canonical form (ValueError if malformed)."},
    {NULL}};

static int module_exec(PyObject *module) {
    if (_import_array() < 0) return -1;
    module_state *st = state_from_module(module);
    if (errors_init(module, st) < 0) return -1;
    if (device_type_init(module, st) < 0) return -1;
    if (tensor_type_init(module, st) < 0) return -1;
    if (plan_type_init(module, st) < 0) return -1;
    if (capture_type_init(module, st) < 0) return -1;
    if (testing_init(module) < 0) return -1;
    /* The core's limits, defined once in helios_core.h. */
    if (PyModule_AddIntConstant(module, "MAX_LAUNCHES", (long)HL_MAX_LAUNCHES) < 0) return -1;
    if (PyModule_AddIntConstant(module, "GEMV_MAX_ROWS", (long)HL_GEMV_MAX_ROWS) < 0) return -1;
    if (PyModule_AddIntConstant(module, "LAYERNORM_ROWS", (long)HL_LAYERNORM_ROWS) < 0) return -1;
    if (PyModule_AddIntConstant(module, "PERSIST_MEMBERS", (long)HL_PERSIST_MEMBERS) < 0) return -1;
    /* HELIOS_PLAN_TRACE's word layout (shaders/layouts.py), for helios/plan_trace.py */
    static const struct {
        const char *name;
        long value; /* (a long holds every uint32_t here: LP64) */
    } trace[] = {{"TRACE_HEADER", HL_TRACE_HEADER},
                 {"TRACE_MEMBERS", HL_TRACE_MEMBERS},
                 {"TRACE_GRID", HL_TRACE_GRID},
                 {"TRACE_STAMP", HL_TRACE_STAMP},
                 {"TRACE_N", HL_TRACE_N},
                 {"TRACE_K", HL_TRACE_K},
                 {"TRACE_ATTENTION", HL_TRACE_ATTENTION}};
    for (size_t i = 0; i < sizeof trace / sizeof trace[0]; i++)
        if (PyModule_AddIntConstant(module, trace[i].name, trace[i].value) < 0) return -1;
    if (PyModule_AddIntConstant(module, "ATTENTION_MAX_HEAD_DIM", (long)HL_ATTENTION_MAX_HEAD_DIM) < 0) return -1;
    PyObject *lim = PyLong_FromUnsignedLongLong(HL_MAX_OPERAND_ELEMENTS);
    if (!lim) return -1;
    int rc = PyModule_AddObjectRef(module, "MAX_OPERAND_ELEMENTS", lim);
    Py_DECREF(lim);
    if (rc < 0) return -1;
    if (PyModule_AddStringConstant(module, "BUILD_COMMIT", HELIOS_BUILD_COMMIT) < 0) return -1;
    /* Digest of every kernel's SPIR-V and the generated table: the tuning cache's key. */
    if (PyModule_AddStringConstant(module, "KERNELS_DIGEST", hl_kernels_digest) < 0) return -1;
    PyObject *plan_ops = plan_ops_table();
    rc = plan_ops ? PyModule_AddObjectRef(module, "PLAN_OPS", plan_ops) : -1;
    Py_XDECREF(plan_ops);
    if (rc < 0) return -1;
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
    Py_VISIT(st->CaptureType);
    Py_VISIT(st->PlanType);
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
    Py_CLEAR(st->CaptureType);
    Py_CLEAR(st->PlanType);
    return 0;
}

static void module_free(void *module) { module_clear((PyObject *)module); }

static PyModuleDef_Slot module_slots[] = {{Py_mod_exec, module_exec}, {0, NULL}};

struct PyModuleDef helios_module = {PyModuleDef_HEAD_INIT,
                                    .m_name = "helios._helios",
                                    .m_doc = "Helios's C engine: Vulkan cooperative-matrix matmul.",
                                    .m_size = sizeof(module_state),
                                    .m_methods = module_methods,
                                    .m_slots = module_slots,
                                    .m_traverse = module_traverse,
                                    .m_clear = module_clear,
                                    .m_free = module_free};

PyMODINIT_FUNC PyInit__helios(void) { return PyModuleDef_Init(&helios_module); }
