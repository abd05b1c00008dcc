/* device_type.c — helios._helios.Device: one Vulkan device, its variants, kernel
 * statistics and telemetry (its capability report: device_info.c; products and
 * chains: gemm.c).
 * Calls on one Device are serialized by a lock taken without the GIL. */
#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL helios_ARRAY_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include "binding.h"

#include <numpy/arrayobject.h>

static module_state *dev_state(DeviceObject *self) { return state_from_type(Py_TYPE(self)); }

#define acquire device_acquire

void device_release(DeviceObject *self) { PyThread_release_lock(self->lock); }

void device_lock_wait(DeviceObject *self) {
    if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(self->lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
}

/* Takes the device lock with the GIL released; fails if the device is closed. */
int device_acquire(DeviceObject *self) {
    if (!self->lock || !self->dev) {
        PyErr_SetString(dev_state(self)->DeviceClosedError, "the Device is closed");
        return -1;
    }
    device_lock_wait(self);
    if (!self->dev) { /* closed while we waited */
        PyThread_release_lock(self->lock);
        PyErr_SetString(dev_state(self)->DeviceClosedError, "the Device is closed");
        return -1;
    }
    return 0;
}

static PyObject *Device_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"index", "disable_coop", "disable_coop2", NULL};
    PyObject *index_obj = Py_None;
    int disable = 0, disable2 = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$pp:Device", kwlist, &index_obj, &disable, &disable2)) return NULL;
    hl_device_options opt = {.index = -1, .disable_coop = disable, .disable_coop2 = disable2};
    if (index_obj != Py_None) {
        if (!PyLong_Check(index_obj) || PyBool_Check(index_obj)) {
            PyErr_Format(PyExc_TypeError, "Device index must be an int or None, not %.80s",
                         Py_TYPE(index_obj)->tp_name);
            return NULL;
        }
        int overflow = 0;
        long idx = PyLong_AsLongAndOverflow(index_obj, &overflow);
        if (idx == -1 && PyErr_Occurred()) return NULL;
        if (overflow) idx = overflow < 0 ? -1 : 1025;
        if (idx < 0 || idx > 1024) {
            PyErr_Format(PyExc_ValueError, "Device index must be 0..1024, got %S", index_obj);
            return NULL;
        }
        opt.index = (int)idx;
    }
    module_state *st = state_from_type(type);
    if (errors_read_interrupt_switch(st) < 0) return NULL;
    DeviceObject *self = (DeviceObject *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->lock = PyThread_allocate_lock();
    if (!self->lock) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    hl_error err = {0};
    hl_status s;
    Py_BEGIN_ALLOW_THREADS s = hl_device_create(&opt, &self->dev, &err);
    Py_END_ALLOW_THREADS if (s != HL_OK) {
        Py_DECREF(self);
        return raise_status(st, &err);
    }
    return (PyObject *)self;
}

static void close_device(DeviceObject *self) {
    if (self->dev) {
        hl_device *d = self->dev;
        self->dev = NULL;
        hl_device_destroy(d);
    }
}

static void Device_dealloc(DeviceObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    close_device(self);
    if (self->lock) {
        PyThread_free_lock(self->lock);
        self->lock = NULL;
    }
    Py_CLEAR(self->info);
    Py_CLEAR(self->capture_keep);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int Device_traverse(DeviceObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->info);
    Py_VISIT(self->capture_keep);
    return 0;
}

static PyObject *Device_close(DeviceObject *self, PyObject *unused) {
    if (self->dev && hl_device_live_exports(self->dev)) {
        /* CUDA consumers still map tensors of this device: freeing them now would
         * leave those consumers reading freed memory. */
        return PyErr_Format(PyExc_BufferError,
                            "the Device has %llu tensor export(s) to CUDA still held by a consumer (a torch tensor "
                            "from torch.from_dlpack, ...): free those first, then close",
                            (unsigned long long)hl_device_live_exports(self->dev));
    }
    if (self->dev && self->lock) {
        device_lock_wait(self);
        close_device(self);
        PyThread_release_lock(self->lock);
    }
    Py_CLEAR(self->capture_keep);
    Py_RETURN_NONE;
}

static PyObject *Device_enter(DeviceObject *self, PyObject *unused) {
    if (!self->dev) {
        PyErr_SetString(dev_state(self)->DeviceClosedError, "the Device is closed");
        return NULL;
    }
    return Py_NewRef(self);
}

static PyObject *Device_exit(DeviceObject *self, PyObject *args) { return Device_close(self, NULL); }

static PyObject *Device_closed(DeviceObject *self, void *c) { return PyBool_FromLong(self->dev == NULL); }

/* ---- variants ------------------------------------------------------------ */
int variant_arg(DeviceObject *self, PyObject *obj, hl_variant *v, int *given) {
    *given = 0;
    if (obj == Py_None) return 0;
    const char *s = text_arg(obj, "variant");
    if (!s) return -1;
    hl_error err = {0};
    if (hl_variant_parse(s, v, &err) != HL_OK) {
        raise_status(dev_state(self), &err);
        return -1;
    }
    *given = 1;
    return 0;
}

static PyObject *variant_str(const hl_variant *v) {
    char buf[HL_VARIANT_STR_MAX];
    hl_variant_format(v, buf, sizeof buf);
    return PyUnicode_FromString(buf);
}

static PyObject *Device_variants(DeviceObject *self, PyObject *unused) {
    if (acquire(self) < 0) return NULL;
    hl_variant vs[256];
    size_t n = hl_variant_list(self->dev, vs, 256);
    PyThread_release_lock(self->lock);
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *s = variant_str(&vs[i]);
        if (!s) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, s);
    }
    return list;
}

/* default_variant(m=0, n=0, k=0, batch=1, dtype, trans_b=False): with a shape, the
 * variant a product of that shape (B as N x K with trans_b) runs when none is given:
 * the matrix-vector kernel for a few rows, else tiles and split-K for its grid. */
static PyObject *Device_default_variant(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"m", "n", "k", "batch", "dtype", "trans_b", NULL};
    unsigned int m = 0, n = 0, k = 0;
    unsigned long long batch = 1;
    PyObject *dto = NULL;
    int trans_b = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|IIIKOp:default_variant", kwlist, &m, &n, &k, &batch, &dto, &trans_b))
        return NULL;
    hl_dtype in = HL_F16;
    if (dto && dto != Py_None && dtype_arg(dto, "dtype", &in) < 0) return NULL;
    if (acquire(self) < 0) return NULL;
    hl_variant v;
    hl_error err = {0};
    hl_status s = m && n && k    ? hl_variant_for_input(self->dev, m, n, k, batch, in, trans_b, &v, &err)
                  : in == HL_F16 ? hl_variant_default(self->dev, &v, &err)
                                 : hl_variant_for_input(self->dev, 4096, 4096, 4096, 1, in, 0, &v, &err);
    PyThread_release_lock(self->lock);
    if (s != HL_OK) return raise_status(dev_state(self), &err);
    return variant_str(&v);
}

static PyObject *Device_active_override(DeviceObject *self, PyObject *unused) {
    if (acquire(self) < 0) return NULL;
    const char *name = hl_variant_override(self->dev);
    PyThread_release_lock(self->lock);
    if (!name) Py_RETURN_NONE;
    return PyUnicode_FromString(name);
}

static PyObject *Device_check_variant(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"variant", "dtype", NULL};
    PyObject *arg, *dto = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:check_variant", kwlist, &arg, &dto)) return NULL;
    hl_variant v;
    int given;
    hl_dtype in = HL_F16;
    if (variant_arg(self, arg, &v, &given) < 0 || (dto && dto != Py_None && dtype_arg(dto, "dtype", &in) < 0))
        return NULL;
    if (!given) {
        PyErr_SetString(PyExc_TypeError, "check_variant needs a variant string");
        return NULL;
    }
    if (acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_status s = hl_variant_check(self->dev, &v, in, &err);
    PyThread_release_lock(self->lock);
    if (s != HL_OK) return raise_status(dev_state(self), &err);
    return variant_str(&v);
}

/* kernel_stats(variant=None, out_dtype="float16", in_dtype="float16", machine_code=False)
 * -> {name: value}: the driver's statistics of the variant's main kernel ({} where the
 * driver offers none), its code_digest, and with machine_code its pipeline_cache_data. */
static PyObject *Device_kernel_stats(DeviceObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"variant", "out_dtype", "in_dtype", "machine_code", NULL};
    PyObject *vo = Py_None, *dto = NULL, *ido = NULL;
    int want_code = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OOOp:kernel_stats", kwlist, &vo, &dto, &ido, &want_code))
        return NULL;
    hl_variant v;
    int given;
    hl_dtype out_dtype = HL_F16, in_dtype = HL_F16;
    if (variant_arg(self, vo, &v, &given) < 0 || (ido && ido != Py_None && dtype_arg(ido, "in_dtype", &in_dtype) < 0))
        return NULL;
    out_dtype = in_dtype;
    if (dto && dto != Py_None && dtype_arg(dto, "out_dtype", &out_dtype) < 0) return NULL;
    if (acquire(self) < 0) return NULL;
    hl_error err = {0};
    hl_kernel_stats ks;
    hl_machine_code code = {0};
    hl_status s = HL_OK;
    if (!given)
        s = in_dtype == HL_F16 ? hl_variant_default(self->dev, &v, &err)
                               : hl_variant_for_input(self->dev, 4096, 4096, 4096, 1, in_dtype, 0, &v, &err);
    if (s == HL_OK) {
        Py_BEGIN_ALLOW_THREADS s = hl_kernel_stats_get(self->dev, &v, in_dtype, out_dtype, &ks, &err);
        if (s == HL_OK && want_code) s = hl_kernel_machine_code(self->dev, &ks, &code.data, &code.size, &err);
        Py_END_ALLOW_THREADS
    }
    PyThread_release_lock(self->lock);
    if (s != HL_OK) return raise_status(dev_state(self), &err);
    return kernel_stats_dict(&ks, want_code ? &code : NULL);
}

PyObject *kernel_stats_dict(const hl_kernel_stats *ks, hl_machine_code *code) {
    PyObject *d = PyDict_New(), *h = NULL;
    if (!d) goto fail;
    for (uint32_t i = 0; i < ks->n; i++) {
        PyObject *f = PyFloat_FromDouble(ks->items[i].value);
        int bad = !f || PyDict_SetItemString(d, ks->items[i].name, f) < 0;
        Py_XDECREF(f);
        if (bad) goto fail;
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)ks->code_digest);
    h = PyUnicode_FromString(hex);
    if (!h || PyDict_SetItemString(d, "code_digest", h) < 0) goto fail;
    Py_CLEAR(h);
    if (code) {
        h = PyBytes_FromStringAndSize(code->data, (Py_ssize_t)code->size);
        if (!h || PyDict_SetItemString(d, "pipeline_cache_data", h) < 0) goto fail;
        Py_CLEAR(h);
        free(code->data);
        code->data = NULL;
    }
    return d;
fail:
    Py_XDECREF(h);
    Py_XDECREF(d);
    if (code) {
        free(code->data);
        code->data = NULL;
    }
    return NULL;
}

/* ---- matmul -------------------------------------------------------------- */
int dtype_arg(PyObject *obj, const char *name, hl_dtype *out) {
    const char *s = PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL;
    if (s && (!strcmp(s, "float16") || !strcmp(s, "f16"))) {
        *out = HL_F16;
        return 0;
    }
    if (s && (!strcmp(s, "bfloat16") || !strcmp(s, "bf16"))) {
        *out = HL_BF16;
        return 0;
    }
    if (s && (!strcmp(s, "float32") || !strcmp(s, "f32"))) {
        *out = HL_F32;
        return 0;
    }
    PyErr_Clear();
    PyObject *r = PyObject_Repr(obj);
    PyErr_Format(PyExc_ValueError, "%s must be 'float16', 'bfloat16' or 'float32', got %U", name, r ? r : Py_None);
    Py_XDECREF(r);
    return -1;
}

/* ---- telemetry ----------------------------------------------------------- */
static PyObject *Device_telemetry(DeviceObject *self, PyObject *unused) {
    if (acquire(self) < 0) return NULL;
    hl_telemetry t;
    hl_telemetry_collect(self->dev, &t);
    PyThread_release_lock(self->lock);
    double hit = t.matmuls ? (double)t.coop_matmuls / (double)t.matmuls : 0.0;
    PyObject *d = Py_BuildValue(
        "{s:K,s:K,s:d,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:d,s:d,s:d,s:s}", "matmuls", (unsigned long long)t.matmuls,
        "coop_matmuls", (unsigned long long)t.coop_matmuls, "coop_hit_rate", hit, "dispatches",
        (unsigned long long)t.dispatches, "barriers", (unsigned long long)t.barriers, "overlapped",
        (unsigned long long)t.overlapped, "submits", (unsigned long long)t.submits, "bytes_up",
        (unsigned long long)t.bytes_up, "bytes_down", (unsigned long long)t.bytes_down, "pipeline_compiles",
        (unsigned long long)t.pipeline_compiles, "pipeline_compile_ms", t.pipeline_compile_ms, "record_ms", t.record_ms,
        "submit_wait_ms", t.submit_wait_ms, "last_gpu_ms", t.last_gpu_ms, "last_variant", t.last_variant);
    if (!d) return NULL;
    PyObject *live = Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "live_buffers", (unsigned long long)t.live_buffers,
        "live_memory", (unsigned long long)t.live_memory, "live_pipelines", (unsigned long long)t.live_pipelines,
        "device_bytes", (unsigned long long)t.device_bytes, "peak_device_bytes",
        (unsigned long long)t.peak_device_bytes, "live_tensors", (unsigned long long)t.tensors, "chains",
        (unsigned long long)t.chains, "chain_ops", (unsigned long long)t.chain_ops, "attentions",
        (unsigned long long)t.attentions, "coop_attentions", (unsigned long long)t.coop_attentions, "cuda_imports",
        (unsigned long long)t.cuda_imports, "live_exports", (unsigned long long)hl_device_live_exports(self->dev));
    PyObject *parts =
        live ? Py_BuildValue("{s:d,s:d,s:d,s:d,s:d,s:d,s:K}", "plan_ms", t.plan_ms, "async_slot_ms", t.async_slot_ms,
                             "async_descriptor_ms", t.async_descriptor_ms, "async_submit_ms", t.async_submit_ms,
                             "cuda_call_ms", t.cuda_call_ms, "async_gpu_ms", t.async_gpu_ms, "async_timed",
                             (unsigned long long)t.async_timed)
             : NULL;
    if (!parts || PyDict_Update(live, parts) < 0) Py_CLEAR(live);
    Py_XDECREF(parts);
    if (!live || PyDict_Update(d, live) < 0) {
        Py_XDECREF(live);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(live);
    return d;
}

static PyObject *Device_empty_cache(DeviceObject *self, PyObject *unused) {
    if (acquire(self) < 0) return NULL;
    hl_device_release_scratch(self->dev);
    PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyObject *Device_reset_telemetry(DeviceObject *self, PyObject *unused) {
    if (acquire(self) < 0) return NULL;
    hl_telemetry_reset(self->dev);
    PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyMethodDef Device_methods[] = {
    {"close", (PyCFunction)Device_close, METH_NOARGS, "Release the Vulkan device (idempotent)."},
    {"__enter__", (PyCFunction)Device_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Device_exit, METH_VARARGS, NULL},
    {"variants", (PyCFunction)Device_variants, METH_NOARGS, "Canonical strings of every variant valid here."},
    {"_mma_roof", (PyCFunction)Device_mma_roof, METH_VARARGS,
     "Low-level: _mma_roof(tm, tn, tk, acc, iters, groups, warmup, reps) -> (samples_ms, flops per dispatch)."},
    {"_async_values", (PyCFunction)Device_async_values, METH_NOARGS,
     "Low-level: (wait, signal) values of the timeline semaphore shared with CUDA (BufferError without it)."},
    {"_cuda_signal", (PyCFunction)Device_cuda_signal, METH_VARARGS,
     "Low-level: _cuda_signal(stream, value): the CUDA stream signals the shared semaphore."},
    {"_cuda_wait", (PyCFunction)Device_cuda_wait, METH_VARARGS,
     "Low-level: _cuda_wait(stream, value): the CUDA stream waits for the shared semaphore."},
    {"_group_begin", (PyCFunction)Device_group_begin, METH_VARARGS,
     "Low-level: _group_begin(wait, signal): the operations until _group_end are one submission waiting for "
     "`wait` and signalling `signal` (values from _async_values); each records after the one before."},
    {"_semaphore_value", (PyCFunction)Device_semaphore_value, METH_NOARGS,
     "Low-level: the ordering semaphore's current value (what the CUDA stream has signalled so far)."},
    {"_profile_start", (PyCFunction)Device_profile_start, METH_VARARGS,
     "Low-level: _profile_start(capacity=4096): from now on every ordered operation runs alone and writes a GPU "
     "timestamp when done, every submission one when it starts (a measuring tool: no overlap while on)."},
    {"_profile_stop", (PyCFunction)Device_profile_stop, METH_NOARGS,
     "Low-level: _profile_stop() -> ([(kind, ms), ...], dropped): the profile's timestamps in recording order "
     "('submission' starts, 'op' ends; ms after the first), once the work is done; dropped: past capacity."},
    {"_group_end", (PyCFunction)Device_group_end, METH_NOARGS,
     "Low-level: submit the open group (always, also after one of its operations failed)."},
    {"default_variant", (PyCFunction)(void (*)(void))Device_default_variant, METH_VARARGS | METH_KEYWORDS,
     "default_variant(m=0, n=0, k=0, batch=1, dtype='float16'): the variant used when none is given "
     "(HELIOS_* switches applied); with a shape, the one a product (or a batch of them) of that shape "
     "runs; dtype='bfloat16': the one bfloat16 inputs run."},
    {"active_override", (PyCFunction)Device_active_override, METH_NOARGS,
     "The environment switch choosing the kernel for every shape (HELIOS_VARIANT, HELIOS_COOP_*), "
     "'disable_coop', or None: tuned picks and shape defaults apply only when None."},
    {"check_variant", (PyCFunction)(void (*)(void))Device_check_variant, METH_VARARGS | METH_KEYWORDS,
     "check_variant(variant, dtype='float16'): validate a variant string for this device and input "
     "dtype; returns its canonical form."},
    {"_gemm", (PyCFunction)(void (*)(void))Device_gemm, METH_VARARGS | METH_KEYWORDS,
     "Low-level product with layouts, batches, epilogue and tensors (helios.Device.matmul converts)."},
    {"_capture_begin", (PyCFunction)Device_capture_begin, METH_NOARGS,
     "Low-level: _capture_begin(): this Device's ordered operations are recorded into a capture until "
     "_capture_end() (which returns it) or _capture_abort()."},
    {"_capture_end", (PyCFunction)Device_capture_end, METH_NOARGS,
     "Low-level: _capture_end() -> Capture: the recording ended, replayable."},
    {"_capture_abort", (PyCFunction)Device_capture_abort, METH_NOARGS,
     "Low-level: _capture_abort(): the recording dropped (idempotent)."},
    {"_plan", (PyCFunction)(void (*)(void))Device_plan, METH_VARARGS | METH_KEYWORDS,
     "Low-level: _plan(ops, params=0) -> Plan: operation dicts on Tensors (products, layernorm, embed, "
     "attention_decode, top1) recorded once into a command buffer of their own, with `params` parameter words "
     "(helios.Plan builds them)."},
    {"_chain", (PyCFunction)(void (*)(void))Device_chain, METH_VARARGS | METH_KEYWORDS,
     "Low-level: run a list of tensor products as one submission (helios.Chain builds it)."},
    {"_copy_strided", (PyCFunction)(void (*)(void))Device_copy_strided, METH_VARARGS | METH_KEYWORDS,
     "Low-level 4-D strided copy of 16-bit elements between Tensors (helios.Device.copy_strided checks)."},
    {"_activation", (PyCFunction)(void (*)(void))Device_activation, METH_VARARGS | METH_KEYWORDS,
     "Low-level activation or activation backward over 16-bit Tensors (helios.Device.activation checks)."},
    {"_layernorm", (PyCFunction)(void (*)(void))Device_layernorm, METH_VARARGS | METH_KEYWORDS,
     "Low-level LayerNorm of an fp32 stream (a 16-bit branch added first) on Tensors (helios.Device.layernorm "
     "checks)."},
    {"_train", (PyCFunction)(void (*)(void))Device_train, METH_VARARGS | METH_KEYWORDS,
     "Low-level: _train(kind, dst, *, ids, src, src2, aux, rows, n, seq, table_rows, ld, off, accumulate, scale, "
     "dtype, wait_value, signal_value): a training step's embedding (0), token (1) and position (2) table "
     "gradients, cross-entropy (3) or column sum (4) (helios_train.h)."},
    {"_adamw", (PyCFunction)(void (*)(void))Device_adamw, METH_VARARGS | METH_KEYWORDS,
     "Low-level: _adamw(p, m, v, g, words, n, step_slot, lr_slot, beta1, beta2, eps, weight_decay, copy=None, "
     "dtype='bfloat16', *, wait_value, signal_value): AdamW, the step count and learning rate from words."},
    {"_layernorm_backward", (PyCFunction)(void (*)(void))Device_layernorm_backward, METH_VARARGS | METH_KEYWORDS,
     "Low-level LayerNorm backward on Tensors (helios.Device.layernorm_backward checks)."},
    {"_attention", (PyCFunction)(void (*)(void))Device_attention, METH_VARARGS | METH_KEYWORDS,
     "Low-level flash-attention forward on (B*H, S, d) float16 or bfloat16 arrays or Tensors "
     "(helios.Device.attention converts)."},
    {"_attention_backward", (PyCFunction)(void (*)(void))Device_attention_backward, METH_VARARGS | METH_KEYWORDS,
     "Low-level flash-attention backward on Tensors: dQ, dK, dV from Q, K, V, O, dO and the forward's "
     "log-sum-exp (helios.Device.attention_backward converts)."},
    {"_attention_kernel_stats", (PyCFunction)(void (*)(void))Device_attention_kernel_stats,
     METH_VARARGS | METH_KEYWORDS,
     "_attention_kernel_stats(d, variant=None, causal=False, dtype='float16') -> dict: the "
     "driver's statistics of that attention kernel; {} where the driver offers none."},
    {"_attention_variants", (PyCFunction)(void (*)(void))Device_attention_variants, METH_VARARGS | METH_KEYWORDS,
     "_attention_variants(d, variant=None, skv=0, causal=False, dtype='float16', backward=False) -> "
     "(default or checked variant, [valid variants]) of the forward or the backward."},
    {"kernel_stats", (PyCFunction)(void (*)(void))Device_kernel_stats, METH_VARARGS | METH_KEYWORDS,
     "kernel_stats(variant=None, out_dtype=in_dtype, in_dtype='float16') -> dict: the driver's statistics of the "
     "variant's kernel (registers, shared memory, ...); {} where the driver offers none."},
    {"telemetry", (PyCFunction)Device_telemetry, METH_NOARGS, "Counters since creation or the last reset."},
    {"reset_telemetry", (PyCFunction)Device_reset_telemetry, METH_NOARGS, "Zero the counters."},
    {"empty_cache", (PyCFunction)Device_empty_cache, METH_NOARGS,
     "Free the device-local scratch buffers that products on host arrays reuse (made again on "
     "demand); Tensors stay."},
    {NULL}};

static PyGetSetDef Device_getset[] = {
    {"info", (getter)Device_info, NULL, "Capability report (read-only mapping).", NULL},
    {"closed", (getter)Device_closed, NULL, "True once close() was called.", NULL},
    {NULL}};

static PyType_Slot Device_slots[] = {
    {Py_tp_new, Device_new},
    {Py_tp_dealloc, Device_dealloc},
    {Py_tp_traverse, Device_traverse},
    {Py_tp_methods, Device_methods},
    {Py_tp_getset, Device_getset},
    {Py_tp_doc, "Device(index=None, *, disable_coop=False)\n\nA Vulkan device. index: which one "
                "(default: HELIOS_DEVICE, else the best GPU). disable_coop: like HELIOS_DISABLE_COOP=1."},
    {0, NULL}};

static PyType_Spec Device_spec = {.name = "helios._helios.Device",
                                  .basicsize = sizeof(DeviceObject),
                                  .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
                                  .slots = Device_slots};

int device_type_init(PyObject *module, module_state *st) {
    st->DeviceType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &Device_spec, NULL);
    if (!st->DeviceType) return -1;
    return PyModule_AddObjectRef(module, "Device", (PyObject *)st->DeviceType);
}
