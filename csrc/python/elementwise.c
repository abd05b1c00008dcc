/* elementwise.c — Device._copy_strided, _activation, _layernorm(_backward), _train and
 * _adamw (core elementwise.c, train.c): the ops between products, on Tensors. helios.Device.copy_strided / .activation
 * work out the arguments. */
#include "binding.h"
#include "../core/helios_elementwise.h"

#include "../core/helios_train.h"

static module_state *gstate(DeviceObject *self) { return state_from_type(Py_TYPE(self)); }

/* A Tensor of this Device (None allowed where optional): *t, or -1 with the exception set. */
static int tensor_arg(DeviceObject *self, PyObject *o, const char *name, int optional, hl_tensor **t) {
    *t = NULL;
    if (optional && o == Py_None) return 0;
    if (!is_tensor(gstate(self), o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a helios.Tensor, not %.80s", name, Py_TYPE(o)->tp_name);
        return -1;
    }
    const void *unused;
    return operand_arg(self, o, name, 0, 0, &unused, t);
}

/* One core call with the GIL released and the device lock held; None or NULL. */
static PyObject *run_core(DeviceObject *self, hl_status (*fn)(hl_device *, const void *, hl_error *),
                          const void *args) {
    if (device_acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status s;
    Py_BEGIN_ALLOW_THREADS s = fn(self->dev, args, &err);
    Py_END_ALLOW_THREADS device_release(self);
    if (s != HL_OK) return raise_status(gstate(self), &err);
    Py_RETURN_NONE;
}

static hl_status call_copy(hl_device *dev, const void *a, hl_error *err) { return hl_copy_strided(dev, a, err); }
static hl_status call_activation(hl_device *dev, const void *a, hl_error *err) { return hl_activate(dev, a, err); }

/* _copy_strided(src, dst, sizes, src_strides, dst_strides, src_offset=0, dst_offset=0, *,
 *               wait_value=0, signal_value=0) -> None
 *   sizes: 4 ints (outermost first); strides: 3 ints each (dimension 3 is contiguous). */
PyObject *Device_copy_strided(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"src",        "dst",        "sizes",      "src_strides",  "dst_strides",
                             "src_offset", "dst_offset", "wait_value", "signal_value", NULL};
    PyObject *so, *dobj;
    hl_copy_args ca = {0};
    unsigned long long wait_value = 0, signal_value = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO(IIII)(III)(III)|II$KK:_copy_strided", kwlist, &so, &dobj,
                                     &ca.sizes[0], &ca.sizes[1], &ca.sizes[2], &ca.sizes[3], &ca.src_strides[0],
                                     &ca.src_strides[1], &ca.src_strides[2], &ca.dst_strides[0], &ca.dst_strides[1],
                                     &ca.dst_strides[2], &ca.src_offset, &ca.dst_offset, &wait_value, &signal_value))
        return NULL;
    if (tensor_arg(self, so, "src", 0, &ca.src) < 0 || tensor_arg(self, dobj, "dst", 0, &ca.dst) < 0) return NULL;
    ca.wait_value = wait_value;
    ca.signal_value = signal_value;
    return run_core(self, call_copy, &ca);
}

/* _activation(z, y, n, act, dtype, grad=None, *, wait_value=0, signal_value=0) -> None */
PyObject *Device_activation(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"z", "y", "n", "act", "dtype", "grad", "wait_value", "signal_value", NULL};
    PyObject *zo, *yo, *dto, *go = Py_None;
    hl_activation_args aa = {0};
    unsigned long long n, wait_value = 0, signal_value = 0;
    unsigned int act;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOKIO|O$KK:_activation", kwlist, &zo, &yo, &n, &act, &dto, &go,
                                     &wait_value, &signal_value))
        return NULL;
    if (dtype_arg(dto, "dtype", &aa.dtype) < 0) return NULL;
    if (tensor_arg(self, zo, "z", 0, &aa.z) < 0 || tensor_arg(self, yo, "y", 0, &aa.y) < 0 ||
        tensor_arg(self, go, "grad", 1, &aa.grad) < 0)
        return NULL;
    aa.n = n;
    aa.act = (hl_activation)act;
    aa.wait_value = wait_value;
    aa.signal_value = signal_value;
    return run_core(self, call_activation, &aa);
}

static hl_status call_layernorm(hl_device *dev, const void *a, hl_error *err) { return hl_layernorm(dev, a, err); }
static hl_status call_layernorm_backward(hl_device *dev, const void *a, hl_error *err) {
    return hl_layernorm_backward(dev, a, err);
}

/* _layernorm(x, gamma, beta, h, stats, rows, d, eps, dtype, r=None, x_out=None, rms=False, *,
 *            wait_value=0, signal_value=0) -> None */
PyObject *Device_layernorm(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"x",     "gamma", "beta",  "h",   "stats",      "rows",         "d", "eps",
                             "dtype", "r",     "x_out", "rms", "wait_value", "signal_value", NULL};
    PyObject *o[5], *dto, *ro = Py_None, *xo = Py_None;
    hl_layernorm_args la = {0};
    double eps;
    int rms = 0;
    unsigned long long wait_value = 0, signal_value = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOIIdO|OOp$KK:_layernorm", kwlist, &o[0], &o[1], &o[2], &o[3],
                                     &o[4], &la.rows, &la.d, &eps, &dto, &ro, &xo, &rms, &wait_value, &signal_value))
        return NULL;
    if (dtype_arg(dto, "dtype", &la.dtype) < 0) return NULL;
    hl_tensor **slots[5] = {&la.x, &la.gamma, &la.beta, &la.h, &la.stats};
    for (int i = 0; i < 5; i++) /* RMSNorm has no beta: None */
        if (tensor_arg(self, o[i], kwlist[i], i == 2 && rms, slots[i]) < 0) return NULL;
    la.rms = (uint32_t)rms;
    if (tensor_arg(self, ro, "r", 1, &la.r) < 0 || tensor_arg(self, xo, "x_out", 1, &la.x_out) < 0) return NULL;
    la.eps = (float)eps;
    la.wait_value = wait_value;
    la.signal_value = signal_value;
    return run_core(self, call_layernorm, &la);
}

/* _layernorm_backward(grad_h, x, stats, gamma, gx, gx16, partial, rows, d, dtype,
 *                     grad_res=None, *, wait_value=0, signal_value=0) -> None */
PyObject *Device_layernorm_backward(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"grad_h", "x", "stats", "gamma",    "gx",         "gx16",         "partial",
                             "rows",   "d", "dtype", "grad_res", "wait_value", "signal_value", NULL};
    PyObject *o[7], *dto, *go = Py_None;
    hl_layernorm_bwd_args la = {0};
    unsigned long long wait_value = 0, signal_value = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOIIO|O$KK:_layernorm_backward", kwlist, &o[0], &o[1], &o[2],
                                     &o[3], &o[4], &o[5], &o[6], &la.rows, &la.d, &dto, &go, &wait_value,
                                     &signal_value))
        return NULL;
    if (dtype_arg(dto, "dtype", &la.dtype) < 0) return NULL;
    hl_tensor **slots[7] = {&la.grad_h, &la.x, &la.stats, &la.gamma, &la.gx, &la.gx16, &la.partial};
    for (int i = 0; i < 7; i++)
        if (tensor_arg(self, o[i], kwlist[i], 0, slots[i]) < 0) return NULL;
    if (tensor_arg(self, go, "grad_res", 1, &la.grad_res) < 0) return NULL;
    la.wait_value = wait_value;
    la.signal_value = signal_value;
    return run_core(self, call_layernorm_backward, &la);
}

typedef struct {
    hl_train_pass pass;
    hl_train_args a;
} train_call;

static hl_status call_train(hl_device *dev, const void *c, hl_error *err) {
    const train_call *t = c;
    return hl_train_op(dev, t->pass, &t->a, err);
}

/* _train(pass, dst, *, ids=None, src=None, src2=None, aux=None, rows=0, n=0, seq=0,
 *        table_rows=0, ld=0, off=0, accumulate=False, scale=1.0, dtype="float16", dst_off=0, flags=0,
 *        wait_value=0, signal_value=0) -> None: one of train.comp's passes (helios_train.h). */
PyObject *Device_train(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"kind",  "dst",     "ids",        "src",        "src2",         "aux",        "rows",
                             "n",     "seq",     "table_rows", "ld",         "off",          "accumulate", "scale",
                             "dtype", "dst_off", "flags",      "wait_value", "signal_value", NULL};
    PyObject *dsto, *o[4] = {Py_None, Py_None, Py_None, Py_None}, *dto = NULL;
    train_call c = {0};
    unsigned int pass;
    int accumulate = 0;
    double scale = 1.0;
    unsigned long long wait_value = 0, signal_value = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "IO|$OOOOIIIIIIpdOIIKK:_train", kwlist, &pass, &dsto, &o[0], &o[1],
                                     &o[2], &o[3], &c.a.rows, &c.a.n, &c.a.seq, &c.a.table_rows, &c.a.ld, &c.a.off,
                                     &accumulate, &scale, &dto, &c.a.dst_off, &c.a.flags, &wait_value, &signal_value))
        return NULL;
    c.a.dtype = HL_F16;
    if (dto && dtype_arg(dto, "dtype", &c.a.dtype) < 0) return NULL;
    if (tensor_arg(self, dsto, "dst", 0, &c.a.dst) < 0) return NULL;
    hl_tensor **slots[4] = {&c.a.ids, &c.a.src, &c.a.src2, &c.a.aux};
    static const char *names[4] = {"ids", "src", "src2", "aux"};
    for (int i = 0; i < 4; i++)
        if (tensor_arg(self, o[i], names[i], 1, slots[i]) < 0) return NULL;
    c.pass = (hl_train_pass)pass;
    c.a.accumulate = (uint32_t)accumulate;
    c.a.scale = (float)scale;
    c.a.wait_value = wait_value;
    c.a.signal_value = signal_value;
    return run_core(self, call_train, &c);
}

static hl_status call_adamw(hl_device *dev, const void *c, hl_error *err) { return hl_adamw(dev, c, err); }

/* _adamw(p, m, v, g, words, n, step_slot, lr_slot, beta1, beta2, eps, weight_decay, copy=None,
 *        dtype="bfloat16", *, clip_slot=0, max_norm=0.0, guard=False, wait_value=0, signal_value=0) -> None */
PyObject *Device_adamw(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"p",         "m",        "v",     "g",          "words",        "n",    "step_slot",
                             "lr_slot",   "beta1",    "beta2", "eps",        "weight_decay", "copy", "dtype",
                             "clip_slot", "max_norm", "guard", "wait_value", "signal_value", NULL};
    PyObject *o[5], *co = Py_None, *dto = NULL;
    hl_adamw_op c = {0};
    double b1, b2, eps, wd, max_norm = 0.0;
    int guard = 0;
    unsigned long long wait_value = 0, signal_value = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOIIIdddd|OO$IdpKK:_adamw", kwlist, &o[0], &o[1], &o[2], &o[3],
                                     &o[4], &c.a.n, &c.a.step_slot, &c.a.lr_slot, &b1, &b2, &eps, &wd, &co, &dto,
                                     &c.clip_slot, &max_norm, &guard, &wait_value, &signal_value))
        return NULL;
    c.max_norm = (float)max_norm;
    c.guard = (uint32_t)guard;
    c.a.dtype = HL_BF16;
    if (dto && dtype_arg(dto, "dtype", &c.a.dtype) < 0) return NULL;
    hl_tensor **slots[5] = {&c.a.p, &c.a.m, &c.a.v, &c.a.g, &c.words};
    for (int i = 0; i < 5; i++)
        if (tensor_arg(self, o[i], kwlist[i], 0, slots[i]) < 0) return NULL;
    if (tensor_arg(self, co, "copy", 1, &c.a.copy) < 0) return NULL;
    c.a.beta1 = (float)b1, c.a.beta2 = (float)b2, c.a.eps = (float)eps, c.a.weight_decay = (float)wd;
    c.wait_value = wait_value;
    c.signal_value = signal_value;
    return run_core(self, call_adamw, &c);
}
