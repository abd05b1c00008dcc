/* attention.c — Device._attention (one flash-attention forward on host arrays
 * or Tensors, optionally GPU-timed) and Device._attention_variants.
 * helios.Device.attention works out shapes and dtypes; this layer checks that
 * every buffer is large enough for what the core will touch. */
#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL helios_ARRAY_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include "binding.h"

#include <math.h>
#include <numpy/arrayobject.h>

static module_state *gstate(DeviceObject *self) { return state_from_type(Py_TYPE(self)); }

static int attn_variant_arg(DeviceObject *self, PyObject *o, hl_attn_variant *v, int *given) {
    *given = 0;
    if (!o || o == Py_None) return 0;
    const char *s = text_arg(o, "variant");
    if (!s) return -1;
    hl_error err = {0};
    if (hl_attn_variant_parse(s, v, &err) != HL_OK) {
        PyErr_SetString(PyExc_ValueError, err.message);
        return -1;
    }
    *given = 1;
    return 0;
}

static hl_status call_attention(hl_device *dev, void *args, hl_error *err) { return hl_attention(dev, args, err); }

/* _attention(q, k, v, bh, sq, skv, d, *, causal=False, scale, variant=None,
 *            warmup=0, iters=0, flush_bytes=0, out=None, dtype='float16')
 *   -> (o (bh, sq, d) of dtype (bfloat16: uint16 bits) or None, samples_ms, gpu_ms, variant) */
PyObject *Device_attention(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"q",           "k",      "v",          "bh",           "sq",     "skv",
                             "d",           "causal", "scale",      "variant",      "warmup", "iters",
                             "flush_bytes", "out",    "wait_value", "signal_value", "dtype",  NULL};
    PyObject *qo, *ko, *vo, *variant = Py_None, *out = Py_None, *dto = Py_None;
    unsigned int bh, sq, skv, d, warmup = 0, iters = 0;
    unsigned long long flush = 0, wait_value = 0, signal_value = 0;
    int causal = 0;
    double scale = NAN;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOIIII|$pdOIIKOKKO:_attention", kwlist, &qo, &ko, &vo, &bh, &sq,
                                     &skv, &d, &causal, &scale, &variant, &warmup, &iters, &flush, &out, &wait_value,
                                     &signal_value, &dto))
        return NULL;
    hl_dtype dtype = HL_F16;
    if (dto != Py_None && dtype_arg(dto, "dtype", &dtype) < 0) return NULL;
    if (dtype == HL_F32) {
        PyErr_SetString(PyExc_TypeError, "_attention: dtype must be 'float16' or 'bfloat16'");
        return NULL;
    }
    const int npy = npy_type_of(dtype);
    if (isnan(scale)) {
        PyErr_SetString(PyExc_TypeError, "_attention: scale (a finite float) is required");
        return NULL;
    }
    if (iters > HL_MAX_LAUNCHES || warmup > HL_MAX_LAUNCHES) {
        PyErr_Format(PyExc_ValueError, "iters and warmup must be 0..%u, got %u, %u", HL_MAX_LAUNCHES, iters, warmup);
        return NULL;
    }
    hl_attention_args aa = {0};
    hl_attn_variant av;
    int given;
    if (attn_variant_arg(self, variant, &av, &given) < 0) return NULL;
    if (given) aa.variant = &av;
    aa.batch_heads = bh;
    aa.sq = sq;
    aa.skv = skv;
    aa.d = d;
    aa.causal = causal;
    aa.dtype = dtype;
    aa.scale = (float)scale;
    const uint64_t q_bytes = (uint64_t)bh * sq * d * 2, kv_bytes = (uint64_t)bh * skv * d * 2;
    if (operand_arg(self, qo, "q", npy, q_bytes, &aa.q, &aa.t_q) < 0 ||
        operand_arg(self, ko, "k", npy, kv_bytes, &aa.k, &aa.t_k) < 0 ||
        operand_arg(self, vo, "v", npy, kv_bytes, &aa.v, &aa.t_v) < 0)
        return NULL;
    PyArrayObject *host_out = NULL;
    if (out != Py_None) {
        const void *unused;
        if (!is_tensor(gstate(self), out)) {
            PyErr_Format(PyExc_TypeError, "out must be a helios.Tensor, not %.80s", Py_TYPE(out)->tp_name);
            return NULL;
        }
        if (operand_arg(self, out, "out", npy, q_bytes, &unused, &aa.t_o) < 0) return NULL;
    } else {
        npy_intp dims[3] = {bh, sq, d};
        host_out = (PyArrayObject *)PyArray_SimpleNew(3, dims, npy);
        if (!host_out) return NULL;
        aa.o = PyArray_DATA(host_out);
    }
    aa.warmup = warmup;
    aa.iters = iters;
    aa.flush_bytes = flush;
    aa.wait_value = wait_value;
    aa.signal_value = signal_value;
    PyObject *result =
        timed_call(self, call_attention, &aa, &aa.samples_ms, &aa.batch_ms, &aa.info, iters, (PyObject *)host_out);
    Py_XDECREF(host_out);
    return result;
}

/* _attention_variants(d, variant=None, skv=0, causal=False) -> (default, [every
 * valid variant]) for head dimension d (the default for S_kv keys and the mask;
 * skv 0: long); with variant, validates it and returns (canonical, []). */
PyObject *Device_attention_variants(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"d", "variant", "skv", "causal", "dtype", NULL};
    unsigned int d, skv = 0;
    int causal = 0;
    PyObject *variant = Py_None, *dto = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "I|OIpO:_attention_variants", kwlist, &d, &variant, &skv, &causal,
                                     &dto))
        return NULL;
    hl_attn_variant given_v, dflt, list[64];
    int given;
    hl_dtype in = HL_F16;
    if (attn_variant_arg(self, variant, &given_v, &given) < 0 || (dto != Py_None && dtype_arg(dto, "dtype", &in) < 0))
        return NULL;
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status s = given ? hl_attn_variant_check(self->dev, &given_v, d, in, &err)
                        : hl_attn_variant_default(self->dev, d, skv, causal, in, &dflt, &err);
    size_t n = (s == HL_OK && !given) ? hl_attn_variant_list(self->dev, d, in, list, 64) : 0;
    device_release(self);
    if (s != HL_OK) return raise_status(gstate(self), &err);
    char buf[HL_VARIANT_STR_MAX];
    hl_attn_variant_format(given ? &given_v : &dflt, buf, sizeof buf);
    PyObject *names = PyList_New(0);
    if (!names) return NULL;
    for (size_t i = 0; i < n; i++) {
        char vs[HL_VARIANT_STR_MAX];
        hl_attn_variant_format(&list[i], vs, sizeof vs);
        PyObject *u = PyUnicode_FromString(vs);
        if (!u || PyList_Append(names, u) < 0) {
            Py_XDECREF(u);
            Py_DECREF(names);
            return NULL;
        }
        Py_DECREF(u);
    }
    return Py_BuildValue("(sN)", buf, names);
}

/* _attention_kernel_stats(d, variant=None, causal=False) -> dict */
PyObject *Device_attention_kernel_stats(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"d", "variant", "causal", "dtype", NULL};
    unsigned int d;
    int causal = 0;
    PyObject *variant = Py_None, *dto = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "I|OpO:_attention_kernel_stats", kwlist, &d, &variant, &causal, &dto))
        return NULL;
    hl_attn_variant v;
    int given;
    hl_dtype in = HL_F16;
    if (attn_variant_arg(self, variant, &v, &given) < 0 || (dto != Py_None && dtype_arg(dto, "dtype", &in) < 0))
        return NULL;
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_kernel_stats ks;
    hl_status s = given ? HL_OK : hl_attn_variant_default(self->dev, d, 0, causal, in, &v, &err);
    if (s == HL_OK) {
        Py_BEGIN_ALLOW_THREADS s = hl_attn_kernel_stats(self->dev, &v, d, causal, in, &ks, &err);
        Py_END_ALLOW_THREADS
    }
    device_release(self);
    if (s != HL_OK) return raise_status(gstate(self), &err);
    return kernel_stats_dict(&ks);
}
