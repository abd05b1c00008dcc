/* plan_type.c — helios._helios.Plan: a replayable plan (the core's helios_plan.h),
 * holding its Device and every operation dict it was recorded from (so the Tensors
 * it binds outlive it). Made by Device._plan (gemm.c). */
#include "binding.h"

#include "../core/helios_plan.h"

typedef struct {
    PyObject_HEAD DeviceObject *device;
    hl_plan *p;
    PyObject *ops; /* the recorded operation dicts: they hold the Tensors */
} PlanObject;

static module_state *plan_state(PlanObject *self) { return state_from_type(Py_TYPE(self)); }
static int usable(PlanObject *self);

PyObject *plan_new(DeviceObject *device, hl_plan *p, PyObject *ops) {
    module_state *st = state_from_type(Py_TYPE(device));
    PlanObject *self = PyObject_GC_New(PlanObject, st->PlanType);
    if (!self) {
        device_lock_wait(device);
        hl_plan_destroy(p);
        PyThread_release_lock(device->lock);
        return NULL;
    }
    self->device = (DeviceObject *)Py_NewRef((PyObject *)device);
    self->p = p;
    self->ops = Py_NewRef(ops);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static void destroy(PlanObject *self) {
    if (!self->p) return;
    DeviceObject *dev = self->device;
    if (dev && dev->lock) {
        device_lock_wait(dev);
        hl_plan_destroy(self->p);
        PyThread_release_lock(dev->lock);
    } else {
        hl_plan_destroy(self->p);
    }
    self->p = NULL;
}

static void Plan_dealloc(PlanObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    destroy(self);
    Py_CLEAR(self->ops);
    Py_CLEAR(self->device);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int Plan_traverse(PlanObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->device);
    Py_VISIT(self->ops);
    return 0;
}

/* replay() -> (host_ms, wall_ms, gpu_ms) */
static PyObject *Plan_replay(PlanObject *self, PyObject *unused) {
    if (usable(self) < 0 || device_acquire(self->device) < 0) return NULL;
    hl_error err = {0};
    hl_plan_run run = {0};
    hl_status s;
    Py_BEGIN_ALLOW_THREADS s = hl_plan_replay(self->p, &run, &err);
    Py_END_ALLOW_THREADS device_release(self->device);
    if (s != HL_OK) return raise_status(plan_state(self), &err);
    return Py_BuildValue("(ddd)", run.host_ms, run.wall_ms, run.gpu_ms);
}

/* The plan, open and its device alive: 0, or -1 with the exception set. */
static int usable(PlanObject *self) {
    if (!self->p) {
        PyErr_SetString(PyExc_ValueError, "the plan is closed");
        return -1;
    }
    if (!hl_plan_alive(self->p) || !self->device->dev) {
        PyErr_SetString(plan_state(self)->DeviceClosedError, "the plan's Device is closed");
        return -1;
    }
    return 0;
}

/* write_params(first, words): parameter words first.. set (host memory; no submission). */
static PyObject *Plan_write_params(PlanObject *self, PyObject *args) {
    unsigned int first;
    PyObject *words;
    if (!PyArg_ParseTuple(args, "IO:write_params", &first, &words) || usable(self) < 0) return NULL;
    PyObject *seq = PySequence_Fast(words, "words must be a sequence of ints");
    if (!seq) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    uint32_t buf[HL_PLAN_MAX_PARAMS];
    if (n > (Py_ssize_t)HL_PLAN_MAX_PARAMS) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "a plan has at most %u parameter words, got %zd", HL_PLAN_MAX_PARAMS, n);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        unsigned long long v = PyLong_Check(o) ? PyLong_AsUnsignedLongLong(o) : (unsigned long long)-1;
        if (!PyLong_Check(o) || PyErr_Occurred() || v > UINT32_MAX) {
            PyErr_Clear();
            Py_DECREF(seq);
            return PyErr_Format(PyExc_ValueError, "parameter word %u must be an int in 0..2^32-1", first + (unsigned)i);
        }
        buf[i] = (uint32_t)v;
    }
    Py_DECREF(seq);
    if (device_acquire(self->device) < 0) return NULL;
    hl_error err = {0};
    hl_status s = hl_plan_params_write(self->p, first, buf, (uint32_t)n, &err);
    device_release(self->device);
    if (s != HL_OK) return raise_status(plan_state(self), &err);
    Py_RETURN_NONE;
}

/* read_params(first, n) -> list of ints */
static PyObject *Plan_read_params(PlanObject *self, PyObject *args) {
    unsigned int first, n;
    if (!PyArg_ParseTuple(args, "II:read_params", &first, &n) || usable(self) < 0) return NULL;
    uint32_t buf[HL_PLAN_MAX_PARAMS];
    if (n > HL_PLAN_MAX_PARAMS)
        return PyErr_Format(PyExc_ValueError, "a plan has at most %u parameter words, got %u", HL_PLAN_MAX_PARAMS, n);
    if (device_acquire(self->device) < 0) return NULL;
    hl_error err = {0};
    hl_status s = hl_plan_params_read(self->p, first, buf, n, &err);
    device_release(self->device);
    if (s != HL_OK) return raise_status(plan_state(self), &err);
    PyObject *out = PyList_New(n);
    for (uint32_t i = 0; out && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLong(buf[i]);
        if (!v) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

static PyObject *Plan_close(PlanObject *self, PyObject *unused) {
    destroy(self);
    Py_RETURN_NONE;
}

/* counts -> (ops, dispatches, barriers, grid barriers) as recorded */
static PyObject *Plan_counts(PlanObject *self, void *c) {
    if (!self->p) Py_RETURN_NONE;
    uint32_t ops, dispatches, barriers, grid;
    hl_plan_counts(self->p, &ops, &dispatches, &barriers, &grid);
    return Py_BuildValue("(IIII)", ops, dispatches, barriers, grid);
}

/* run_shape -> (runs, grid, registers) as recorded */
static PyObject *Plan_run_shape(PlanObject *self, void *c) {
    if (!self->p) Py_RETURN_NONE;
    uint32_t runs, grid, registers;
    hl_plan_run_shape(self->p, &runs, &grid, &registers);
    return Py_BuildValue("(III)", runs, grid, registers);
}

/* trace_words() -> bytes or None: the stamps of the last replay's persistent runs (HELIOS_PLAN_TRACE) */
static PyObject *Plan_trace_words(PlanObject *self, PyObject *unused) {
    if (usable(self) < 0) return NULL;
    if (device_acquire(self->device) < 0) return NULL;
    const uint32_t *words;
    const uint32_t n = hl_plan_trace(self->p, &words);
    PyObject *out = n ? PyBytes_FromStringAndSize((const char *)words, 4 * (Py_ssize_t)n) : Py_NewRef(Py_None);
    device_release(self->device);
    return out;
}

static PyObject *Plan_alive(PlanObject *self, void *c) { return PyBool_FromLong(self->p && hl_plan_alive(self->p)); }

static PyMethodDef Plan_methods[] = {
    {"replay", (PyCFunction)Plan_replay, METH_NOARGS,
     "replay() -> (host_ms, wall_ms, gpu_ms): submit the recorded command buffer once and wait; host_ms up to "
     "the submit's return, wall_ms to the end of the wait, gpu_ms between timestamps around the plan."},
    {"trace_words", (PyCFunction)Plan_trace_words, METH_NOARGS,
     "trace_words() -> bytes or None: the stamps the last replay's persistent runs wrote (HELIOS_PLAN_TRACE=1)."},
    {"write_params", (PyCFunction)Plan_write_params, METH_VARARGS,
     "write_params(first, words): set parameter words first.. (mapped host memory: no submission)."},
    {"read_params", (PyCFunction)Plan_read_params, METH_VARARGS,
     "read_params(first, n) -> [int]: parameter words first..first+n (what a top-1 wrote at the last replay)."},
    {"close", (PyCFunction)Plan_close, METH_NOARGS, "Release the plan's command buffer, sets and workspace."},
    {NULL}};

static PyGetSetDef Plan_getset[] = {{"counts", (getter)Plan_counts, NULL,
                                     "(ops, dispatches, barriers, grid barriers) as recorded; None once closed", NULL},
                                    {"run_shape", (getter)Plan_run_shape, NULL,
                                     "(runs, grid, registers) of its persistent runs as recorded; None once closed",
                                     NULL},
                                    {"alive", (getter)Plan_alive, NULL, "False once closed or its Device closed", NULL},
                                    {NULL}};

static PyType_Slot Plan_slots[] = {
    {Py_tp_dealloc, Plan_dealloc},
    {Py_tp_traverse, Plan_traverse},
    {Py_tp_methods, Plan_methods},
    {Py_tp_getset, Plan_getset},
    {Py_tp_doc, "A replayable plan (made by Device._plan): operations recorded once, replayed as one submission."},
    {0, NULL},
};

static PyType_Spec Plan_spec = {
    .name = "helios._helios.Plan",
    .basicsize = sizeof(PlanObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Plan_slots,
};

int plan_type_init(PyObject *module, module_state *st) {
    st->PlanType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &Plan_spec, NULL);
    if (!st->PlanType) return -1;
    return PyModule_AddType(module, st->PlanType);
}
