/* attention.c — Device._attention (one flash-attention forward on host arrays
 * or Tensors, optionally GPU-timed, optionally writing the log-sum-exp),
 * Device._attention_backward (on Tensors) and Device._attention_variants.
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

/* layout=None (packed) or (heads, qkv_rs, o_rs, q_off, k_off, v_off): hl_attn_layout. */
static int layout_arg(PyObject *o, hl_attn_layout *out) {
    memset(out, 0, sizeof *out);
    if (o == Py_None) return 0;
    if (!PyTuple_Check(o) ||
        !PyArg_ParseTuple(o, "IIIIII;layout must be (heads, qkv_rs, o_rs, q_off, k_off, v_off)", &out->heads,
                          &out->qkv_rs, &out->o_rs, &out->q_off, &out->k_off, &out->v_off)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "layout must be a tuple (heads, qkv_rs, o_rs, q_off, k_off, v_off)");
        return -1;
    }
    return 0;
}

/* What the forward's and the backward's arguments share: a 16-bit dtype, a scale, launch
 * counts within HL_MAX_LAUNCHES, the rows' layout and the variant (given: one was named). */
static int common_args(DeviceObject *self, const char *who, PyObject *dto, double scale, unsigned int warmup,
                       unsigned int iters, PyObject *lay, PyObject *variant, hl_dtype *dtype, hl_attn_layout *layout,
                       hl_attn_variant *av, int *given) {
    *dtype = HL_F16;
    if (dto != Py_None && dtype_arg(dto, "dtype", dtype) < 0) return -1;
    if (*dtype == HL_F32) {
        PyErr_Format(PyExc_TypeError, "%s: dtype must be 'float16' or 'bfloat16'", who);
        return -1;
    }
    if (isnan(scale)) {
        PyErr_Format(PyExc_TypeError, "%s: scale (a finite float) is required", who);
        return -1;
    }
    if (iters > HL_MAX_LAUNCHES || warmup > HL_MAX_LAUNCHES) {
        PyErr_Format(PyExc_ValueError, "iters and warmup must be 0..%u, got %u, %u", HL_MAX_LAUNCHES, iters, warmup);
        return -1;
    }
    if (layout_arg(lay, layout) < 0) return -1;
    return attn_variant_arg(self, variant, av, given);
}

/* _attention(q, k, v, bh, sq, skv, d, *, causal=False, scale, variant=None,
 *            warmup=0, iters=0, flush_bytes=0, out=None, dtype='float16', lse=None, layout=None)
 *   lse: a float32 Tensor of bh * sq elements that receives each row's log-sum-exp
 *   layout: None (packed) or (heads, qkv_rs, o_rs, q_off, k_off, v_off), hl_attn_layout
 *   -> (o (bh, sq, d) of dtype (bfloat16: uint16 bits) or None, samples_ms, gpu_ms, variant) */
PyObject *Device_attention(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"q",     "k",       "v",      "bh",    "sq",          "skv", "d",          "causal",
                             "scale", "variant", "warmup", "iters", "flush_bytes", "out", "wait_value", "signal_value",
                             "dtype", "lse",     "layout", NULL};
    PyObject *qo, *ko, *vo, *variant = Py_None, *out = Py_None, *dto = Py_None, *lseo = Py_None, *lay = Py_None;
    unsigned int bh, sq, skv, d, warmup = 0, iters = 0;
    unsigned long long flush = 0, wait_value = 0, signal_value = 0;
    int causal = 0;
    double scale = NAN;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOIIII|$pdOIIKOKKOOO:_attention", kwlist, &qo, &ko, &vo, &bh, &sq,
                                     &skv, &d, &causal, &scale, &variant, &warmup, &iters, &flush, &out, &wait_value,
                                     &signal_value, &dto, &lseo, &lay))
        return NULL;
    hl_attention_args aa = {0};
    hl_dtype dtype;
    hl_attn_variant av;
    int given;
    if (common_args(self, "_attention", dto, scale, warmup, iters, lay, variant, &dtype, &aa.layout, &av, &given) < 0)
        return NULL;
    if (given) aa.variant = &av;
    const int npy = npy_type_of(dtype);
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
    if (lseo != Py_None) {
        const void *unused;
        if (!is_tensor(gstate(self), lseo)) {
            PyErr_Format(PyExc_TypeError, "lse must be a helios.Tensor, not %.80s", Py_TYPE(lseo)->tp_name);
            return NULL;
        }
        if (operand_arg(self, lseo, "lse", NPY_FLOAT32, (uint64_t)bh * sq * 4, &unused, &aa.t_lse) < 0) return NULL;
    }
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

static hl_status call_backward(hl_device *dev, void *args, hl_error *err) {
    return hl_attention_backward(dev, args, err);
}

/* _attention_backward(q, k, v, o, do, lse, dq, dk, dv, bh, sq, skv, d, *, causal=False, scale,
 *                     variant=None, warmup=0, iters=0, flush_bytes=0, wait_value=0,
 *                     signal_value=0, dtype='float16', passes=0, layout=None)
 *   -> (None, samples_ms, gpu_ms, variant); layout as _attention's (dq, dk, dv lie as q, k, v; do as o)
 * passes (measurement): 1 the dQ kernel alone, 2 the dK/dV kernel alone, 0 or 3 both.
 * Every operand a Tensor (lse float32, the others of dtype); dq, dk, dv are written. */
PyObject *Device_attention_backward(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"q",     "k",       "v",      "o",     "do",          "lse",        "dq",
                             "dk",    "dv",      "bh",     "sq",    "skv",         "d",          "causal",
                             "scale", "variant", "warmup", "iters", "flush_bytes", "wait_value", "signal_value",
                             "dtype", "passes",  "layout", NULL};
    PyObject *ob[9], *variant = Py_None, *dto = Py_None, *lay = Py_None;
    unsigned int bh, sq, skv, d, warmup = 0, iters = 0, passes = 0;
    unsigned long long flush = 0, wait_value = 0, signal_value = 0;
    int causal = 0;
    double scale = NAN;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOOOIIII|$pdOIIKKKOIO:_attention_backward", kwlist, &ob[0],
                                     &ob[1], &ob[2], &ob[3], &ob[4], &ob[5], &ob[6], &ob[7], &ob[8], &bh, &sq, &skv, &d,
                                     &causal, &scale, &variant, &warmup, &iters, &flush, &wait_value, &signal_value,
                                     &dto, &passes, &lay))
        return NULL;
    hl_attention_bwd_args ba = {0};
    hl_dtype dtype;
    hl_attn_variant av;
    int given;
    if (common_args(self, "_attention_backward", dto, scale, warmup, iters, lay, variant, &dtype, &ba.layout, &av,
                    &given) < 0)
        return NULL;
    if (given) ba.variant = &av;
    hl_tensor **slots[9] = {&ba.t_q, &ba.t_k, &ba.t_v, &ba.t_o, &ba.t_do, &ba.t_lse, &ba.t_dq, &ba.t_dk, &ba.t_dv};
    for (int i = 0; i < 9; i++) {
        const void *unused;
        if (!is_tensor(gstate(self), ob[i])) {
            PyErr_Format(PyExc_TypeError, "%s must be a helios.Tensor, not %.80s", kwlist[i], Py_TYPE(ob[i])->tp_name);
            return NULL;
        }
        if (operand_arg(self, ob[i], kwlist[i], npy_type_of(dtype), 0, &unused, slots[i]) < 0) return NULL;
    }
    ba.batch_heads = bh;
    ba.sq = sq;
    ba.skv = skv;
    ba.d = d;
    ba.causal = causal;
    ba.dtype = dtype;
    ba.scale = (float)scale;
    ba.warmup = warmup;
    ba.iters = iters;
    ba.flush_bytes = flush;
    ba.wait_value = wait_value;
    ba.signal_value = signal_value;
    ba.passes = passes;
    return timed_call(self, call_backward, &ba, &ba.samples_ms, &ba.batch_ms, &ba.info, iters, NULL);
}

/* _attention_variants(d, variant=None, skv=0, causal=False, dtype=None, backward=False)
 * -> (default, [every valid variant]) for head dimension d (the default for S_kv
 * keys and the mask; skv 0: long); with variant, validates it and returns
 * (canonical, []). backward: the backward's variants (its own rules). */
PyObject *Device_attention_variants(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"d", "variant", "skv", "causal", "dtype", "backward", NULL};
    unsigned int d, skv = 0;
    int causal = 0, backward = 0;
    PyObject *variant = Py_None, *dto = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "I|OIpOp:_attention_variants", kwlist, &d, &variant, &skv, &causal,
                                     &dto, &backward))
        return NULL;
    hl_attn_variant given_v, dflt, list[64];
    int given;
    hl_dtype in = HL_F16;
    if (attn_variant_arg(self, variant, &given_v, &given) < 0 || (dto != Py_None && dtype_arg(dto, "dtype", &in) < 0))
        return NULL;
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status s;
    if (given)
        s = backward ? hl_attn_bwd_variant_check(self->dev, &given_v, d, in, &err)
                     : hl_attn_variant_check(self->dev, &given_v, d, in, &err);
    else if (backward)
        s = hl_attn_bwd_variant_default(self->dev, d, skv, causal, in, &dflt, &err);
    else
        s = hl_attn_variant_default(self->dev, d, skv, causal, in, &dflt, &err);
    size_t n = 0;
    if (s == HL_OK && !given)
        n = backward ? hl_attn_bwd_variant_list(self->dev, d, in, list, 64)
                     : hl_attn_variant_list(self->dev, d, in, list, 64);
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

/* _attention_kernel_stats(d, variant=None, causal=False, dtype=None, backward=False,
 * machine_code=False) -> dict (backward: {"dq": dict, "dkdv": dict}, the backward's two
 * kernels; machine_code: each with its pipeline_cache_data) */
PyObject *Device_attention_kernel_stats(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"d", "variant", "causal", "dtype", "backward", "machine_code", NULL};
    unsigned int d;
    int causal = 0, backward = 0, want_code = 0;
    PyObject *variant = Py_None, *dto = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "I|OpOpp:_attention_kernel_stats", kwlist, &d, &variant, &causal, &dto,
                                     &backward, &want_code))
        return NULL;
    hl_attn_variant v;
    int given;
    hl_dtype in = HL_F16;
    if (attn_variant_arg(self, variant, &v, &given) < 0 || (dto != Py_None && dtype_arg(dto, "dtype", &in) < 0))
        return NULL;
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_kernel_stats ks[2];
    hl_machine_code code[2] = {{0}};
    hl_status s = given      ? HL_OK
                  : backward ? hl_attn_bwd_variant_default(self->dev, d, 0, causal, in, &v, &err)
                             : hl_attn_variant_default(self->dev, d, 0, causal, in, &v, &err);
    if (s == HL_OK) {
        Py_BEGIN_ALLOW_THREADS s = backward ? hl_attn_bwd_kernel_stats(self->dev, &v, d, causal, in, ks, &err)
                                            : hl_attn_kernel_stats(self->dev, &v, d, causal, in, &ks[0], &err);
        for (int i = 0; i < (backward ? 2 : 1) && s == HL_OK && want_code; i++)
            s = hl_kernel_machine_code(self->dev, &ks[i], &code[i].data, &code[i].size, &err);
        Py_END_ALLOW_THREADS
    }
    device_release(self);
    if (s != HL_OK) {
        free(code[0].data);
        free(code[1].data);
        return raise_status(gstate(self), &err);
    }
    if (!backward) return kernel_stats_dict(&ks[0], want_code ? &code[0] : NULL);
    PyObject *dq = kernel_stats_dict(&ks[0], want_code ? &code[0] : NULL);
    PyObject *dkdv = kernel_stats_dict(&ks[1], want_code ? &code[1] : NULL); /* frees code[1] on every path */
    PyObject *out = dq && dkdv ? Py_BuildValue("{sOsO}", "dq", dq, "dkdv", dkdv) : NULL;
    Py_XDECREF(dq);
    Py_XDECREF(dkdv);
    return out;
}
