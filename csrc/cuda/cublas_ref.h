/* cublas_ref.h — fp16 GEMM through cuBLASLt, timed with CUDA events exactly as
 * Helios is timed with Vulkan timestamps. Python-free. */
#ifndef HELIOS_CUBLAS_REF_H
#define HELIOS_CUBLAS_REF_H
#include <stddef.h>
#include <stdint.h>

typedef struct hc_args {
    uint32_t m, n, k;
    const uint16_t *a, *b; /* row-major fp16 */
    uint16_t *c;           /* row-major fp16 out (fp32 accumulate) */
    uint32_t warmup, iters;
    double *samples_ms;   /* iters values: one event pair per launch */
    double *batch_ms;     /* iters launches captured in one CUDA graph, / iters */
    uint64_t flush_bytes; /* > 0: memset this many bytes before each sample (cold L2) */
} hc_args;

/* 0 on success; otherwise msg names the failing call and its error string. */
int hc_matmul(const hc_args *args, char *msg, size_t msg_cap);
/* Name and UUID of device 0 and the runtime/driver versions, for metadata. */
int hc_info(char *name, size_t cap, unsigned char uuid[16], int *runtime_version, int *driver_version,
            int *cublaslt_version);
#endif
