/* plan_ops.c — Device._plan: a plan's operation dicts parsed into the core's
 * arguments (helios_plan.h): products (gemm.c's parser), LayerNorm and the decode
 * step's embed, attention over a KV cache and top-1. helios.Plan builds the dicts. */
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

static int layernorm_op(DeviceObject *self, PyObject *d, hl_layernorm_args *a) {
    static const char *const keys[] = {"x", "gamma", "beta", "h", "stats"};
    hl_tensor **slots[] = {&a->x, &a->gamma, &a->beta, &a->h, &a->stats};
    for (int i = 0; i < 5; i++)
        if (tensor_key(self, d, keys[i], 0, slots[i]) < 0) return -1;
    if (tensor_key(self, d, "r", 1, &a->r) < 0 || tensor_key(self, d, "x_out", 1, &a->x_out) < 0 ||
        u32_key(d, "rows", &a->rows) < 0 || u32_key(d, "d", &a->d) < 0 || float_key(d, "eps", &a->eps) < 0)
        return -1;
    return dtype_key(d, &a->dtype);
}

static int embed_op(DeviceObject *self, PyObject *d, hl_embed_args *a) {
    if (tensor_key(self, d, "tokens", 0, &a->tokens) < 0 || tensor_key(self, d, "positions", 0, &a->positions) < 0 ||
        tensor_key(self, d, "out", 0, &a->out) < 0)
        return -1;
    if (u32_key(d, "d", &a->d) < 0 || u32_key(d, "token_rows", &a->token_rows) < 0 ||
        u32_key(d, "pos_rows", &a->pos_rows) < 0 || u32_key(d, "token_slot", &a->token_slot) < 0 ||
        u32_key(d, "pos_slot", &a->pos_slot) < 0)
        return -1;
    return 0;
}

static int attention_op(DeviceObject *self, PyObject *d, hl_attn_decode_args *a) {
    if (tensor_key(self, d, "qkv", 0, &a->qkv) < 0 || tensor_key(self, d, "k_cache", 0, &a->k_cache) < 0 ||
        tensor_key(self, d, "v_cache", 0, &a->v_cache) < 0 || tensor_key(self, d, "out", 0, &a->out) < 0)
        return -1;
    if (u32_key(d, "heads", &a->heads) < 0 || u32_key(d, "head_dim", &a->head_dim) < 0 ||
        u32_key(d, "max_len", &a->max_len) < 0 || u32_key(d, "pos_slot", &a->pos_slot) < 0 ||
        float_key(d, "scale", &a->scale) < 0)
        return -1;
    return dtype_key(d, &a->dtype);
}

static int top1_op(DeviceObject *self, PyObject *d, hl_top1_args *a) {
    if (tensor_key(self, d, "x", 0, &a->x) < 0 || u32_key(d, "n", &a->n) < 0 || u32_key(d, "slot", &a->slot) < 0)
        return -1;
    return 0;
}

static int plan_op_arg(DeviceObject *self, PyObject *d, const char *kind, hl_plan_op *op) {
    memset(op, 0, sizeof *op);
    if (strcmp(kind, "layernorm") == 0) {
        op->kind = HL_PLAN_LAYERNORM;
        return layernorm_op(self, d, &op->layernorm);
    }
    if (strcmp(kind, "embed") == 0) {
        op->kind = HL_PLAN_EMBED;
        return embed_op(self, d, &op->embed);
    }
    if (strcmp(kind, "attention_decode") == 0) {
        op->kind = HL_PLAN_ATTN_DECODE;
        return attention_op(self, d, &op->attn);
    }
    if (strcmp(kind, "top1") == 0) {
        op->kind = HL_PLAN_TOP1;
        return top1_op(self, d, &op->top1);
    }
    PyErr_Format(PyExc_ValueError,
                 "plan operation kind '%.40s': expected matmul, layernorm, embed, attention_decode or top1", kind);
    return -1;
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
