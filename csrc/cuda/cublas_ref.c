/* cublas_ref.c — see cublas_ref.h. Every CUDA/cuBLASLt call is checked and every
 * resource is released on every path. */
#include "cublas_ref.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#define CU(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            snprintf(msg, cap, "%s failed: %s (%s)", #call, cudaGetErrorName(e_), cudaGetErrorString(e_));             \
            goto done;                                                                                                 \
        }                                                                                                              \
    } while (0)
#define LT(call)                                                                                                       \
    do {                                                                                                               \
        cublasStatus_t s_ = (call);                                                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                             \
            snprintf(msg, cap, "%s failed: %s", #call, cublasLtGetStatusName(s_));                                     \
            goto done;                                                                                                 \
        }                                                                                                              \
    } while (0)

int hc_matmul(const hc_args *x, char *msg, size_t cap) {
    int rc = -1;
    const size_t a_bytes = (size_t)x->m * x->k * 2, b_bytes = (size_t)x->k * x->n * 2,
                 c_bytes = (size_t)x->m * x->n * 2, ws_bytes = 32u << 20;
    void *da = NULL, *db = NULL, *dc = NULL, *ws = NULL, *flush = NULL;
    cudaStream_t stream = NULL;
    cudaEvent_t *ev = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cublasLtHandle_t lt = NULL;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    const uint32_t n_ev = 2 * x->iters + 2;

    CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CU(cudaMalloc(&da, a_bytes));
    CU(cudaMalloc(&db, b_bytes));
    CU(cudaMalloc(&dc, c_bytes));
    CU(cudaMalloc(&ws, ws_bytes));
    if (x->flush_bytes) CU(cudaMalloc(&flush, x->flush_bytes));
    CU(cudaMemcpyAsync(da, x->a, a_bytes, cudaMemcpyHostToDevice, stream));
    CU(cudaMemcpyAsync(db, x->b, b_bytes, cudaMemcpyHostToDevice, stream));
    CU(cudaMemsetAsync(dc, 0xff, c_bytes, stream)); /* poison: NaN in fp16 */

    /* Row-major C = A B is column-major C^T = B^T A^T: pass B first, no transposes. */
    LT(cublasLtCreate(&lt));
    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, x->n, x->k, x->n));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, x->k, x->m, x->k));
    LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, x->n, x->m, x->n));
    LT(cublasLtMatmulPreferenceCreate(&pref));
    size_t wsz = ws_bytes;
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found));
    if (!found) {
        snprintf(msg, cap, "cuBLASLt found no algorithm for %ux%ux%u fp16", x->m, x->n, x->k);
        goto done;
    }
    const float alpha = 1.0f, beta = 0.0f;
#define GEMM()                                                                                                         \
    LT(cublasLtMatmul(lt, op, &alpha, db, la, da, lb, &beta, dc, lc, dc, lc, &heur.algo, ws, ws_bytes, stream))
    GEMM(); /* the output read back is this first launch's: checked as Helios's is */
    if (x->c) {
        CU(cudaMemcpyAsync(x->c, dc, c_bytes, cudaMemcpyDeviceToHost, stream));
        CU(cudaStreamSynchronize(stream));
    }
    if (x->iters) {
        ev = calloc(n_ev, sizeof *ev);
        if (!ev) {
            snprintf(msg, cap, "out of host memory");
            goto done;
        }
        for (uint32_t i = 0; i < n_ev; i++) CU(cudaEventCreate(&ev[i]));
        for (uint32_t i = 0; i < x->warmup; i++) GEMM();
        for (uint32_t i = 0; i < x->iters; i++) {
            if (flush) CU(cudaMemsetAsync(flush, (int)(i & 0xff), x->flush_bytes, stream));
            CU(cudaEventRecord(ev[2 * i], stream));
            GEMM();
            CU(cudaEventRecord(ev[2 * i + 1], stream));
        }
        CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        for (uint32_t i = 0; i < x->iters; i++) {
            cublasStatus_t s =
                cublasLtMatmul(lt, op, &alpha, db, la, da, lb, &beta, dc, lc, dc, lc, &heur.algo, ws, ws_bytes, stream);
            if (s != CUBLAS_STATUS_SUCCESS) {
                cudaStreamEndCapture(stream, &graph);
                snprintf(msg, cap, "cublasLtMatmul in graph capture failed: %s", cublasLtGetStatusName(s));
                goto done;
            }
        }
        CU(cudaStreamEndCapture(stream, &graph));
        CU(cudaGraphInstantiate(&exec, graph, 0));
        CU(cudaGraphLaunch(exec, stream)); /* untimed: first replay uploads the graph */
        CU(cudaEventRecord(ev[2 * x->iters], stream));
        CU(cudaGraphLaunch(exec, stream));
        CU(cudaEventRecord(ev[2 * x->iters + 1], stream));
        CU(cudaStreamSynchronize(stream));
        for (uint32_t i = 0; i < x->iters; i++) {
            float ms;
            CU(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
            x->samples_ms[i] = ms;
        }
        float ms;
        CU(cudaEventElapsedTime(&ms, ev[2 * x->iters], ev[2 * x->iters + 1]));
        if (x->batch_ms) *x->batch_ms = ms / x->iters;
    }
#undef GEMM
    CU(cudaGetLastError());
    rc = 0;
done:
    if (stream) cudaStreamSynchronize(stream);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (ev) {
        for (uint32_t i = 0; i < n_ev; i++)
            if (ev[i]) cudaEventDestroy(ev[i]);
        free(ev);
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    if (lt) cublasLtDestroy(lt);
    cudaFree(flush);
    cudaFree(ws);
    cudaFree(dc);
    cudaFree(db);
    cudaFree(da);
    if (stream) cudaStreamDestroy(stream);
    return rc;
}

int hc_info(char *name, size_t cap, unsigned char uuid[16], int *runtime_version, int *driver_version,
            int *cublaslt_version) {
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return -1;
    snprintf(name, cap, "%s", p.name);
    memcpy(uuid, p.uuid.bytes, 16);
    if (cudaRuntimeGetVersion(runtime_version) != cudaSuccess) return -1;
    if (cudaDriverGetVersion(driver_version) != cudaSuccess) return -1;
    *cublaslt_version = (int)cublasLtGetVersion();
    return 0;
}
