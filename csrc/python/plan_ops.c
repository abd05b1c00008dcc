/* plan_ops.c — Device._plan: a plan's operation dicts parsed into the core's
 * arguments (helios_plan.h): products by gemm.c's parser, every other op by its
 * argument schema (shaders/ops.py, generated into hl_plan_ops.h); and the schema as
 * _helios.PLAN_OPS, which helios.Plan builds its dicts against. */
#include <string.h>

#include "../core/helios_plan.h"
#include "binding.h"

/* d[key]: a Tensor of this Device (None or absent allowed where optional). */
static int tensor_key(DeviceObject *self, PyObject *d, const char *key, int optional, hl_tensor **t) {
    *t = NULL;
    PyObject *o = PyDict_GetItemString(d, key);
    if ((!o || o == Py_None) && optional) return 0;
    if (!o || !is_tensor(state_from_type(Py_TYPE(self)), o)) {
        PyErr_Format(PyExc_TypeError, "plan operation: %s must be a helios.Tensor of this Device", key);
        return -1;
    }
    const void *unused;
    return operand_arg(self, o, key, 0, 0, &unused, t);
}

/* d[key]: an int in 0..2^32-1. */
static int u32_key(PyObject *d, const char *key, uint32_t *out) {
    PyObject *o = PyDict_GetItemString(d, key);
    if (!o || !PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "plan operation: %s must be an int", key);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (PyErr_Occurred() || v > UINT32_MAX) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "plan operation: %s must be 0..2^32-1", key);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int float_key(PyObject *d, const char *key, float *out) {
    PyObject *o = PyDict_GetItemString(d, key);
    double v = o ? PyFloat_AsDouble(o) : -1.0;
    if (!o || (v == -1.0 && PyErr_Occurred())) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "plan operation: %s must be a float", key);
        return -1;
    }
    *out = (float)v;
    return 0;
}

static int dtype_key(PyObject *d, hl_dtype *out) {
    PyObject *o = PyDict_GetItemString(d, "dtype");
    if (!o) {
        PyErr_SetString(PyExc_TypeError, "plan operation: dtype is required");
        return -1;
    }
    return dtype_arg(o, "dtype", out);
}

/* The argument a->key of d into its field at op + a->offset, by its type. */
static int arg_key(DeviceObject *self, PyObject *d, const hl_plan_arg *a, char *op) {
    void *field = op + a->offset;
    switch (a->type) {
        case HL_ARG_TENSOR:
            return tensor_key(self, d, a->key, a->optional, (hl_tensor **)field);
        case HL_ARG_U32:
            return u32_key(d, a->key, (uint32_t *)field);
        case HL_ARG_F32:
            return float_key(d, a->key, (float *)field);
        case HL_ARG_DTYPE:
            return dtype_key(d, (hl_dtype *)field);
    }
    PyErr_Format(PyExc_SystemError, "plan operation: %s has an unknown argument type", a->key);
    return -1;
}

/* A non-product op dict of kind `kind` into op, by its schema (shaders/ops.py). */
static int plan_op_arg(DeviceObject *self, PyObject *d, const char *kind, hl_plan_op *op) {
    memset(op, 0, sizeof *op);
    for (uint32_t k = 0; k < HL_PLAN_KINDS; k++) {
        const hl_plan_op_schema *sc = &hl_plan_op_schemas[k];
        if (sc->product || strcmp(kind, sc->name) != 0) continue;
        op->kind = (hl_plan_kind)k;
        for (uint32_t i = 0; i < sc->n_args; i++)
            if (arg_key(self, d, &sc->args[i], (char *)op) < 0) return -1;
        return 0;
    }
    char names[256] = "";
    for (uint32_t k = 0; k < HL_PLAN_KINDS; k++) {
        const char *sep = k == 0 ? "" : k + 1 == HL_PLAN_KINDS ? " or " : ", ";
        strncat(names, sep, sizeof names - strlen(names) - 1);
        strncat(names, hl_plan_op_schemas[k].name, sizeof names - strlen(names) - 1);
    }
    PyErr_Format(PyExc_ValueError, "plan operation kind '%.40s': expected %s", kind, names);
    return -1;
}

/* _helios.PLAN_OPS: {kind: ((key, type, optional), ...)} from the schema (a product's:
 * (), its arguments are Device.matmul's). */
PyObject *plan_ops_table(void) {
    static const char *const types[] = {"tensor", "u32", "f32", "dtype"};
    PyObject *out = PyDict_New();
    for (uint32_t k = 0; out && k < HL_PLAN_KINDS; k++) {
        const hl_plan_op_schema *sc = &hl_plan_op_schemas[k];
        PyObject *args = PyTuple_New(sc->n_args);
        for (uint32_t i = 0; args && i < sc->n_args; i++) {
            const hl_plan_arg *a = &sc->args[i];
            PyObject *row = Py_BuildValue("(ssO)", a->key, types[a->type], a->optional ? Py_True : Py_False);
            if (!row)
                Py_CLEAR(args);
            else
                PyTuple_SET_ITEM(args, i, row);
        }
        if (!args || PyDict_SetItemString(out, sc->name, args) < 0) Py_CLEAR(out);
        Py_XDECREF(args);
    }
    return out;
}

/* _plan(ops, params=0) -> Plan: the operation dicts (on Tensors) recorded once, for
 * replays; a dict's "kind" (default "matmul") names its operation (plan_ops.c). */
PyObject *Device_plan(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"ops", "params", NULL};
    PyObject *ops;
    unsigned int n_params = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|I:_plan", kwlist, &ops, &n_params)) return NULL;
    PyObject *seq = PySequence_Fast(ops, "ops must be a list of operation dicts");
    if (!seq) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = NULL;
    hl_plan_op *po = NULL;
    hl_variant *variants = NULL;
    if (n < 1 || n > 4096) {
        PyErr_Format(PyExc_ValueError, "a plan holds 1..4096 operations, got %zd", n);
        goto done;
    }
    po = PyMem_Calloc((size_t)n, sizeof *po);
    variants = PyMem_Calloc((size_t)n, sizeof *variants);
    if (!po || !variants) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *ko = PyDict_Check(d) ? PyDict_GetItemString(d, "kind") : NULL;
        const char *kind = ko ? text_arg(ko, "kind") : "matmul";
        if (!kind) goto done;
        if (strcmp(kind, "matmul") != 0) {
            if (plan_op_arg(self, d, kind, &po[i]) < 0) goto done;
            continue;
        }
        po[i].kind = HL_PLAN_MATMUL;
        if (tensor_product_arg(self, d, "plan", i, &po[i].matmul, &variants[i]) < 0) goto done;
    }
    if (device_acquire(self) == 0) {
        hl_error err = {0};
        hl_plan *p = NULL;
        hl_status s;
        Py_BEGIN_ALLOW_THREADS s = hl_plan_create(self->dev, po, (uint32_t)n, n_params, &p, &err);
        Py_END_ALLOW_THREADS device_release(self);
        if (s != HL_OK) {
            raise_status(state_from_type(Py_TYPE(self)), &err);
        } else {
            PyObject *keep = PySequence_Tuple(seq); /* a copy: the caller's list may change later */
            if (keep) result = plan_new(self, p, keep);
            if (!keep) {
                device_lock_wait(self);
                hl_plan_destroy(p);
                PyThread_release_lock(self->lock);
            }
            Py_XDECREF(keep);
        }
    }
done:
    PyMem_Free(po);
    PyMem_Free(variants);
    Py_DECREF(seq);
    return result;
}
