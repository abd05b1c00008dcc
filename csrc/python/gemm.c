/* gemm.c — Device._gemm (one product with layouts, batches, epilogue, host
 * arrays or Tensors) and Device._chain (tensor products in one submission).
 * helios.Device.matmul / helios.Chain work out the shapes; this layer checks
 * that every buffer is large enough for what the core will touch. */
#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL helios_ARRAY_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include "binding.h"

#include <numpy/arrayobject.h>
#include <string.h>

static module_state *gstate(DeviceObject *self) { return state_from_type(Py_TYPE(self)); }

/* The keys an operation may carry; anything else is a TypeError. */
static const char *const OP_KEYS[] = {"a",       "b",       "m",    "n",   "k",        "out_dtype", "variant", "batch",
                                      "trans_a", "trans_b", "lda",  "ldb", "stride_a", "stride_b",  "bias",    "act",
                                      "alpha",   "beta",    "c_in", "out", "in_dtype", NULL};

/* The NumPy type a host buffer of dtype t has at this level: bfloat16 travels as
 * its 16-bit patterns (uint16; helios.matmul converts and views). */
int npy_type_of(hl_dtype t) { return t == HL_F32 ? NPY_FLOAT32 : t == HL_BF16 ? NPY_UINT16 : NPY_HALF; }

typedef struct op_refs { /* what parse_op borrowed, for the caller to keep alive */
    hl_variant variant;
    int has_variant;
    PyArrayObject *host_out; /* a new array for C when no `out` tensor */
} op_refs;

static int get_u32(PyObject *d, const char *key, uint32_t lo, uint32_t *out, uint32_t dflt) {
    PyObject *o = PyDict_GetItemString(d, key);
    if (!o || o == Py_None) {
        *out = dflt;
        return 0;
    }
    if (PyBool_Check(o) || !PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80s", key, Py_TYPE(o)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (PyErr_Occurred() || v > UINT32_MAX || v < lo) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be %u..4294967295, got %S", key, lo, o);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int get_u64(PyObject *d, const char *key, uint64_t *out) {
    PyObject *o = PyDict_GetItemString(d, key);
    if (!o || o == Py_None) {
        *out = 0;
        return 0;
    }
    if (PyBool_Check(o) || !PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80s", key, Py_TYPE(o)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be >= 0 and < 2^64, got %S", key, o);
        return -1;
    }
    *out = v;
    return 0;
}

static int get_bool(PyObject *d, const char *key, int *out) {
    PyObject *o = PyDict_GetItemString(d, key);
    *out = 0;
    if (!o) return 0;
    int t = PyObject_IsTrue(o);
    if (t < 0) return -1;
    *out = t;
    return 0;
}

static int get_float(PyObject *d, const char *key, float *out, float dflt) {
    PyObject *o = PyDict_GetItemString(d, key);
    if (!o || o == Py_None) {
        *out = dflt;
        return 0;
    }
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    *out = (float)v;
    return 0;
}

/* A host array (contiguous, aligned, of `type`, at least `need` bytes) or a
 * Tensor of this device. */
int operand_arg(DeviceObject *self, PyObject *o, const char *name, int type, uint64_t need, const void **host,
                hl_tensor **t) {
    module_state *st = gstate(self);
    *host = NULL;
    *t = NULL;
    if (is_tensor(st, o)) {
        TensorObject *to = (TensorObject *)o;
        if (!to->t || !hl_tensor_alive(to->t)) {
            PyErr_Format(st->DeviceClosedError, "%s: the Tensor's Device is closed", name);
            return -1;
        }
        if (to->device != self) { /* name both: the one it lives on, and this one */
            const char *mine = self->dev ? hl_device_caps(self->dev)->name : "a closed Device";
            const char *theirs = to->device->dev ? hl_device_caps(to->device->dev)->name : "a closed Device";
            if (strcmp(mine, theirs) == 0)
                PyErr_Format(PyExc_ValueError,
                             "%s: the Tensor lives on another Device object of the same GPU ('%s'); a Device's "
                             "Tensors are its own: copy it with dev.upload(t.numpy())",
                             name, mine);
            else
                PyErr_Format(PyExc_ValueError,
                             "%s: the Tensor lives on '%s', this Device is '%s': copy it with dev.upload(t.numpy())",
                             name, theirs, mine);
            return -1;
        }
        *t = to->t; /* sizes: the core checks them against the tensor */
        return self->capture_keep ? PyList_Append(self->capture_keep, o) : 0; /* a capture holds what it binds */
    }
    if (!PyArray_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a numpy.ndarray or a helios.Tensor, not %.80s", name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    PyArrayObject *a = (PyArrayObject *)o;
    const char *want = type == NPY_HALF ? "float16" : type == NPY_UINT16 ? "uint16 (bfloat16 bits)" : "float32";
    if (PyArray_TYPE(a) != type) {
        PyErr_Format(PyExc_TypeError, "%s must be %s at this level (helios.matmul converts), got %s", name, want,
                     PyArray_DESCR(a)->typeobj->tp_name);
        return -1;
    }
    if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a)) {
        PyErr_Format(PyExc_ValueError, "%s must be C-contiguous and aligned at this level", name);
        return -1;
    }
    if ((uint64_t)PyArray_NBYTES(a) < need) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes; this product reads %llu", name,
                     (Py_ssize_t)PyArray_NBYTES(a), (unsigned long long)need);
        return -1;
    }
    *host = PyArray_DATA(a);
    return 0;
}

/* One operation from a dict of OP_KEYS. want_host_out: allocate a host C when
 * no `out` tensor is given (a single product; chains take tensors only). */
/* The dict's keys all known, its sizes, layouts, epilogue, types and variant into *ma. */
static int op_fields(DeviceObject *self, PyObject *d, hl_matmul_args *ma, op_refs *refs) {
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &key, &val)) {
        const char *ks = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        int known = 0;
        for (int i = 0; ks && OP_KEYS[i]; i++) known |= !strcmp(ks, OP_KEYS[i]);
        if (!known) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "unknown operation field %R", key);
            return -1;
        }
    }
    uint32_t act = 0;
    if (get_u32(d, "m", 1, &ma->m, 0) < 0 || get_u32(d, "n", 1, &ma->n, 0) < 0 || get_u32(d, "k", 1, &ma->k, 0) < 0 ||
        get_u32(d, "batch", 1, &ma->batch, 1) < 0 || get_u32(d, "lda", 0, &ma->lda, 0) < 0 ||
        get_u32(d, "ldb", 0, &ma->ldb, 0) < 0 || get_u64(d, "stride_a", &ma->stride_a) < 0 ||
        get_u64(d, "stride_b", &ma->stride_b) < 0 || get_bool(d, "trans_a", &ma->trans_a) < 0 ||
        get_bool(d, "trans_b", &ma->trans_b) < 0 || get_u32(d, "act", 0, &act, 0) < 0 ||
        get_float(d, "alpha", &ma->alpha, 1.0f) < 0 || get_float(d, "beta", &ma->beta, 0.0f) < 0)
        return -1;
    if (!ma->m || !ma->n || !ma->k) {
        PyErr_SetString(PyExc_TypeError, "an operation needs m, n and k");
        return -1;
    }
    ma->act = (hl_activation)act;
    ma->scale = 1;
    ma->in_dtype = HL_F16;
    PyObject *ido = PyDict_GetItemString(d, "in_dtype");
    if (ido && ido != Py_None && dtype_arg(ido, "in_dtype", &ma->in_dtype) < 0) return -1;
    PyObject *dto = PyDict_GetItemString(d, "out_dtype");
    if (!dto) dto = Py_None;
    if (dto == Py_None)
        ma->out_dtype = ma->in_dtype;
    else if (dtype_arg(dto, "out_dtype", &ma->out_dtype) < 0)
        return -1;
    PyObject *vo = PyDict_GetItemString(d, "variant");
    if (variant_arg(self, vo ? vo : Py_None, &refs->variant, &refs->has_variant) < 0) return -1;
    if (refs->has_variant) ma->variant = &refs->variant;
    return 0;
}

/* The C operands: a host c_in, a Tensor out, or (want_host_out) a new host array. */
static int op_outputs(DeviceObject *self, PyObject *d, hl_matmul_args *ma, op_refs *refs, uint64_t c_bytes,
                      int want_host_out) {
    const int out_type = npy_type_of(ma->out_dtype);
    PyObject *cin = PyDict_GetItemString(d, "c_in");
    if (cin && cin != Py_None) {
        hl_tensor *unused;
        if (is_tensor(gstate(self), cin)) {
            PyErr_SetString(PyExc_TypeError, "c_in must be a host array; pass a Tensor C as out=");
            return -1;
        }
        if (operand_arg(self, cin, "c_in", out_type, c_bytes, &ma->c_in, &unused) < 0) return -1;
    }
    PyObject *out = PyDict_GetItemString(d, "out");
    if (out && out != Py_None) {
        const void *unused;
        if (!is_tensor(gstate(self), out)) {
            PyErr_Format(PyExc_TypeError, "out must be a helios.Tensor, not %.80s", Py_TYPE(out)->tp_name);
            return -1;
        }
        if (operand_arg(self, out, "out", out_type, c_bytes, &unused, &ma->t_c) < 0) return -1;
    } else if (want_host_out) {
        npy_intp dims[3] = {ma->batch ? ma->batch : 1, ma->m, ma->n};
        refs->host_out = (PyArrayObject *)PyArray_SimpleNew(3, dims, out_type);
        if (!refs->host_out) return -1;
        ma->c = PyArray_DATA(refs->host_out);
    }
    return 0;
}

static int parse_op(DeviceObject *self, PyObject *d, hl_matmul_args *ma, op_refs *refs, int want_host_out) {
    memset(ma, 0, sizeof *ma);
    memset(refs, 0, sizeof *refs);
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "an operation must be a dict, not %.80s", Py_TYPE(d)->tp_name);
        return -1;
    }
    if (op_fields(self, d, ma, refs) < 0) return -1;
    uint64_t a_bytes, b_bytes, c_bytes;
    hl_matmul_sizes(ma, &a_bytes, &b_bytes, &c_bytes);
    PyObject *ao = PyDict_GetItemString(d, "a"), *bo = PyDict_GetItemString(d, "b");
    if (!ao || !bo) {
        PyErr_SetString(PyExc_TypeError, "an operation needs a and b");
        return -1;
    }
    if (operand_arg(self, ao, "a", npy_type_of(ma->in_dtype), a_bytes, &ma->a, &ma->t_a) < 0 ||
        operand_arg(self, bo, "b", npy_type_of(ma->in_dtype), b_bytes, &ma->b, &ma->t_b) < 0)
        return -1;
    PyObject *bias = PyDict_GetItemString(d, "bias");
    if (bias && bias != Py_None) {
        const void *hb;
        if (operand_arg(self, bias, "bias", NPY_FLOAT32, (uint64_t)ma->n * 4, &hb, &ma->t_bias) < 0) return -1;
        ma->bias = hb;
    }
    return op_outputs(self, d, ma, refs, c_bytes, want_host_out);
}

PyObject *samples_list(const double *samples, uint32_t n) {
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (uint32_t i = 0; i < n; i++) {
        PyObject *f = PyFloat_FromDouble(samples[i]);
        if (!f) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, f);
    }
    return list;
}

/* wait_value / signal_value (ordering with CUDA, async.c): popped from kwds when given. */
static int async_args(PyObject *kwds, uint64_t *wait, uint64_t *signal) {
    static const char *const keys[2] = {"wait_value", "signal_value"};
    uint64_t *outs[2] = {wait, signal};
    *wait = *signal = 0;
    for (int i = 0; i < 2; i++) {
        PyObject *o = PyDict_GetItemString(kwds, keys[i]); /* borrowed */
        if (!o) continue;
        unsigned long long v = PyLong_AsUnsignedLongLong(o);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        *outs[i] = v;
        if (PyDict_DelItemString(kwds, keys[i]) < 0) return -1;
    }
    return 0;
}

static int timing_args(PyObject *kwds, uint32_t *warmup, uint32_t *iters, uint64_t *flush) {
    /* removed from kwds so parse_op sees the operation only */
    static const char *const keys[] = {"warmup", "iters", "flush_bytes"};
    uint64_t vals[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        if (!kwds) break;
        PyObject *o = PyDict_GetItemString(kwds, keys[i]);
        if (!o) continue;
        if (PyBool_Check(o) || !PyLong_Check(o)) {
            PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80s", keys[i], Py_TYPE(o)->tp_name);
            return -1;
        }
        long long v = PyLong_AsLongLong(o); /* OverflowError past 64 bits: never truncated */
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0 || (i < 2 && v > (long long)HL_MAX_LAUNCHES)) {
            PyErr_Format(PyExc_ValueError,
                         "%s out of range: %S (iters, warmup: 0..%u; "
                         "flush_bytes >= 0)",
                         keys[i], o, HL_MAX_LAUNCHES);
            return -1;
        }
        vals[i] = (uint64_t)v;
        if (PyDict_DelItemString(kwds, keys[i]) < 0) return -1;
    }
    *warmup = (uint32_t)vals[0];
    *iters = (uint32_t)vals[1];
    *flush = vals[2];
    return 0;
}

static hl_status call_matmul(hl_device *dev, void *args, hl_error *err) { return hl_matmul(dev, args, err); }

PyObject *timed_call(DeviceObject *self, timed_fn fn, void *args, double **samples_slot, double **batch_slot,
                     hl_run_info **info_slot, uint32_t iters, PyObject *host_out) {
    double *samples = NULL, batch_ms = 0.0;
    hl_run_info info = {0};
    if (iters && !(samples = PyMem_Calloc(iters, sizeof *samples))) return PyErr_NoMemory();
    *samples_slot = samples;
    *batch_slot = iters ? &batch_ms : NULL;
    *info_slot = &info;
    PyObject *result = NULL;
    if (device_acquire(self) == 0) {
        hl_error err = {0};
        hl_status s;
        Py_BEGIN_ALLOW_THREADS s = fn(self->dev, args, &err);
        Py_END_ALLOW_THREADS device_release(self);
        if (s != HL_OK) {
            raise_status(gstate(self), &err);
        } else {
            PyObject *list = samples_list(samples, iters);
            if (list)
                result = Py_BuildValue("(ONds)", host_out ? host_out : Py_None, list, iters ? batch_ms : info.gpu_ms,
                                       info.variant);
        }
    }
    PyMem_Free(samples);
    *samples_slot = NULL;
    *batch_slot = NULL;
    *info_slot = NULL;
    return result;
}

/* _gemm(**op, warmup=0, iters=0, flush_bytes=0) -> (c or None, samples_ms, gpu_ms, variant) */
PyObject *Device_gemm(DeviceObject *self, PyObject *args, PyObject *kwds) {
    if (args && PyTuple_GET_SIZE(args)) {
        PyErr_SetString(PyExc_TypeError, "_gemm takes keyword arguments only");
        return NULL;
    }
    PyObject *d = kwds ? PyDict_Copy(kwds) : PyDict_New();
    if (!d) return NULL;
    uint32_t warmup, iters;
    uint64_t flush;
    hl_matmul_args ma;
    op_refs refs;
    uint64_t wait_value, signal_value;
    if (timing_args(d, &warmup, &iters, &flush) < 0 || async_args(d, &wait_value, &signal_value) < 0 ||
        parse_op(self, d, &ma, &refs, 1) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    ma.wait_value = wait_value;
    ma.signal_value = signal_value;
    ma.warmup = warmup;
    ma.iters = iters;
    ma.flush_bytes = flush;
    PyObject *result =
        timed_call(self, call_matmul, &ma, &ma.samples_ms, &ma.batch_ms, &ma.info, iters, (PyObject *)refs.host_out);
    Py_XDECREF(refs.host_out);
    Py_DECREF(d); /* the operands it held stayed alive through the call */
    return result;
}

/* Operations on Tensors only (a chain's or a plan's): parsed from a list of dicts. */
typedef struct tensor_ops {
    PyObject *seq;
    Py_ssize_t n;
    hl_matmul_args *ma;
    op_refs *refs;
} tensor_ops;

static void free_tensor_ops(tensor_ops *t) {
    PyMem_Free(t->ma);
    PyMem_Free(t->refs);
    Py_XDECREF(t->seq);
    memset(t, 0, sizeof *t);
}

static int parse_tensor_ops(DeviceObject *self, PyObject *ops, const char *what, tensor_ops *t) {
    memset(t, 0, sizeof *t);
    t->seq = PySequence_Fast(ops, "ops must be a list of operation dicts");
    if (!t->seq) return -1;
    t->n = PySequence_Fast_GET_SIZE(t->seq);
    if (t->n < 1 || t->n > 4096) {
        PyErr_Format(PyExc_ValueError, "a %s holds 1..4096 operations, got %zd", what, t->n);
        free_tensor_ops(t);
        return -1;
    }
    t->ma = PyMem_Calloc((size_t)t->n, sizeof *t->ma);
    t->refs = PyMem_Calloc((size_t)t->n, sizeof *t->refs);
    if (!t->ma || !t->refs) {
        PyErr_NoMemory();
        free_tensor_ops(t);
        return -1;
    }
    for (Py_ssize_t i = 0; i < t->n; i++) {
        if (tensor_product_arg(self, PySequence_Fast_GET_ITEM(t->seq, i), what, i, &t->ma[i], &t->refs[i].variant) <
            0) {
            free_tensor_ops(t);
            return -1;
        }
    }
    return 0;
}

int tensor_product_arg(DeviceObject *self, PyObject *d, const char *what, Py_ssize_t i, hl_matmul_args *ma,
                       hl_variant *variant) {
    op_refs refs;
    if (parse_op(self, d, ma, &refs, 0) < 0) return -1;
    if (!ma->t_a || !ma->t_b || !ma->t_c || ma->bias) {
        PyErr_Format(PyExc_TypeError,
                     "%s operation %zd: a, b, out and bias must be helios.Tensor objects (upload host arrays first)",
                     what, i);
        return -1;
    }
    *variant = refs.variant;
    ma->variant = refs.has_variant ? variant : NULL;
    return 0;
}

/* _chain(ops, warmup=0, iters=0) -> (samples_ms, gpu_ms): ops is a list of
 * operation dicts on Tensors; iters = 0 runs the chain once. */
PyObject *Device_chain(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"ops", "warmup", "iters", NULL};
    PyObject *ops;
    Py_ssize_t warmup_n = 0, iters_n = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|nn:_chain", kwlist, &ops, &warmup_n, &iters_n)) return NULL;
    if (warmup_n < 0 || warmup_n > (Py_ssize_t)HL_MAX_LAUNCHES || iters_n < 0 ||
        iters_n > (Py_ssize_t)HL_MAX_LAUNCHES) {
        PyErr_Format(PyExc_ValueError, "iters and warmup must be 0..%u, got %zd, %zd", HL_MAX_LAUNCHES, iters_n,
                     warmup_n);
        return NULL;
    }
    tensor_ops t;
    if (parse_tensor_ops(self, ops, "chain", &t) < 0) return NULL;
    Py_ssize_t n = t.n;
    hl_matmul_args *ma = t.ma;
    double *samples = PyMem_Calloc(iters_n ? (size_t)iters_n : 1, sizeof *samples);
    PyObject *result = NULL;
    if (!samples) {
        PyErr_NoMemory();
        goto done;
    }
    if (device_acquire(self) < 0) goto done;
    hl_error err = {0};
    hl_status s;
    hl_run_info info = {0};
    Py_BEGIN_ALLOW_THREADS s =
        hl_matmul_chain(self->dev, ma, (uint32_t)n, (uint32_t)warmup_n, (uint32_t)iters_n, samples, &info, &err);
    Py_END_ALLOW_THREADS device_release(self);
    if (s != HL_OK) {
        raise_status(gstate(self), &err);
        goto done;
    }
    PyObject *list = samples_list(samples, (uint32_t)iters_n);
    if (list) result = Py_BuildValue("(Nd)", list, info.gpu_ms);
done:
    PyMem_Free(samples);
    free_tensor_ops(&t);
    return result;
}
