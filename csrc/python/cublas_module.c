/* cublas_module.c — helios._cublas: the cuBLASLt reference for Python. Built only
 * when CMake finds the CUDA toolkit. */
#define PY_SSIZE_T_CLEAN
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>

#include "../cuda/cublas_ref.h"

static int fp16_2d(PyObject *o, const char *name, PyArrayObject **out) {
    if (!PyArray_Check(o) || PyArray_NDIM((PyArrayObject *)o) != 2 || PyArray_TYPE((PyArrayObject *)o) != NPY_HALF ||
        !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous 2-D float16 numpy array", name);
        return -1;
    }
    *out = (PyArrayObject *)o;
    return 0;
}

static PyObject *py_matmul(PyObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"a", "b", "warmup", "iters", "flush_bytes", NULL};
    PyObject *ao, *bo;
    unsigned int warmup = 0, iters = 0;
    unsigned long long flush = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|IIK:matmul", kwlist, &ao, &bo, &warmup, &iters, &flush))
        return NULL;
    PyArrayObject *a, *b;
    if (fp16_2d(ao, "a", &a) < 0 || fp16_2d(bo, "b", &b) < 0) return NULL;
    npy_intp m = PyArray_DIM(a, 0), k = PyArray_DIM(a, 1), n = PyArray_DIM(b, 1);
    if (PyArray_DIM(b, 0) != k || m < 1 || n < 1 || k < 1 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return PyErr_Format(PyExc_ValueError, "cublas matmul: bad shapes (%zd, %zd) x (%zd, %zd)", (Py_ssize_t)m,
                            (Py_ssize_t)k, (Py_ssize_t)PyArray_DIM(b, 0), (Py_ssize_t)n);
    npy_intp dims[2] = {m, n};
    PyArrayObject *c = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_HALF);
    if (!c) return NULL;
    double *samples = iters ? PyMem_Calloc(iters, sizeof(double)) : NULL, batch = 0.0;
    if (iters && !samples) {
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    hc_args x = {.m = (uint32_t)m,
                 .n = (uint32_t)n,
                 .k = (uint32_t)k,
                 .a = PyArray_DATA(a),
                 .b = PyArray_DATA(b),
                 .c = PyArray_DATA(c),
                 .warmup = warmup,
                 .iters = iters,
                 .samples_ms = samples,
                 .batch_ms = &batch,
                 .flush_bytes = flush};
    char msg[512] = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = hc_matmul(&x, msg, sizeof msg);
    Py_END_ALLOW_THREADS if (rc != 0) {
        Py_DECREF(c);
        PyMem_Free(samples);
        return PyErr_Format(PyExc_RuntimeError, "cuBLASLt reference: %s", msg);
    }
    PyObject *list = PyList_New(iters);
    for (unsigned int i = 0; list && i < iters; i++) PyList_SET_ITEM(list, i, PyFloat_FromDouble(samples[i]));
    PyMem_Free(samples);
    if (!list) {
        Py_DECREF(c);
        return NULL;
    }
    return Py_BuildValue("(NNd)", c, list, batch);
}

static PyObject *py_info(PyObject *self, PyObject *unused) {
    char name[256], uuid[40];
    unsigned char u[16];
    int rt = 0, drv = 0, lt = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = hc_info(name, sizeof name, u, &rt, &drv, &lt);
    Py_END_ALLOW_THREADS if (rc != 0) return PyErr_Format(PyExc_RuntimeError,
                                                          "cuBLASLt reference: no usable CUDA device");
    int o = 0; /* 8-4-4-4-12, as helios.Device.info["uuid"] */
    for (int i = 0; i < 16; i++) {
        o += snprintf(uuid + o, sizeof uuid - (size_t)o, "%02x", u[i]);
        if (i == 3 || i == 5 || i == 7 || i == 9) uuid[o++] = '-';
    }
    uuid[o] = 0;
    return Py_BuildValue("{s:s,s:s,s:i,s:i,s:i}", "gpu", name, "uuid", uuid, "cuda_runtime", rt, "cuda_driver", drv,
                         "cublaslt_version", lt);
}

static PyMethodDef methods[] = {
    {"matmul", (PyCFunction)(void (*)(void))py_matmul, METH_VARARGS | METH_KEYWORDS,
     "matmul(a, b, warmup=0, iters=0, flush_bytes=0) -> (c, samples_ms, batch_ms): fp16 GEMM via "
     "cuBLASLt (fp32 accumulate), CUDA events per launch, batch = iters launches in one CUDA graph."},
    {"info", py_info, METH_NOARGS, "GPU name and CUDA runtime/driver/cuBLASLt versions."},
    {NULL}};

static int exec_module(PyObject *m) { return _import_array(); }
static PyModuleDef_Slot slots[] = {{Py_mod_exec, exec_module}, {0, NULL}};
static struct PyModuleDef def = {
    PyModuleDef_HEAD_INIT, .m_name = "helios._cublas", .m_doc = "cuBLASLt fp16 GEMM reference, timed with CUDA events.",
    .m_size = 0,           .m_methods = methods,       .m_slots = slots};
PyMODINIT_FUNC PyInit__cublas(void) { return PyModuleDef_Init(&def); }
