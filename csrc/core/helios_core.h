/* helios_core.h — the Python-free C11 engine's public interface.
 *
 * Every fallible function returns an hl_status and fills an hl_error (code,
 * raw VkResult, and a message naming the failing call, file and line). The
 * binding in csrc/python turns these into Python exceptions; nothing here
 * knows about Python. */
#ifndef HELIOS_CORE_H
#define HELIOS_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes in ranges, so a code says its family (VkFFT-style). */
typedef enum hl_status {
    HL_OK = 0,
    /* 100-199: the caller's arguments or configuration */
    HL_ERR_INVALID_ARGUMENT = 100,
    HL_ERR_INVALID_VARIANT = 101, /* malformed variant string */
    /* 200-299: the device and its memory */
    HL_ERR_NO_DEVICE = 200,
    HL_ERR_DEVICE_INDEX = 201,
    HL_ERR_DEVICE_CLOSED = 202,
    HL_ERR_DEVICE_LOST = 203,
    HL_ERR_OUT_OF_MEMORY = 210, /* an allocation failed */
    HL_ERR_TOO_LARGE = 211,     /* beyond a device limit, not attempted */
    /* 300-399: valid requests this device or build cannot serve */
    HL_ERR_UNSUPPORTED = 300,
    HL_ERR_UNSUPPORTED_VARIANT = 301,
    HL_ERR_UNSUPPORTED_DTYPE = 302,
    /* 400-499: the Vulkan API failed */
    HL_ERR_VULKAN = 400,
    HL_ERR_TIMEOUT = 401,
    /* 500-599: the host stopped the call */
    HL_ERR_INTERRUPTED = 500, /* the host's interrupt check ended a wait on the GPU */
} hl_status;

typedef struct hl_error {
    hl_status code;
    int32_t vk_result; /* raw VkResult, 0 when not a Vulkan failure */
    char message[640];
} hl_error;

const char *hl_status_name(hl_status code);

/* The host's interrupt check (one per process), asked every ~50 ms of a wait for the
 * GPU: nonzero ends the wait (HL_ERR_INTERRUPTED), the work left running (interrupt.c
 * says what then); hl_abandoned_devices: devices closed while it still ran. */
typedef int (*hl_interrupt_fn)(void);
void hl_set_interrupt_check(hl_interrupt_fn fn);
int hl_abandoned_devices(void);
const char *hl_vk_result_name(int32_t vk_result);
/* printf-style; always returns `code` so callers can `return hl_fail(...)`. */
hl_status hl_fail(hl_error *err, hl_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- element types ---------------------------------------------------- */
typedef enum hl_dtype { HL_F16 = 0, HL_F32 = 1, HL_BF16 = 2 } hl_dtype;
const char *hl_dtype_name(hl_dtype t);
size_t hl_dtype_size(hl_dtype t);

/* ---- limits (the one definition; Python reads them as _helios.MAX_LAUNCHES,
 * _helios.MAX_OPERAND_ELEMENTS, _helios.ATTENTION_MAX_HEAD_DIM) ------------------------------------------ */
/* Warm-up and timed launches per call, each: bounds the timestamp pool and the
 * samples buffer a caller allocates. */
#define HL_MAX_LAUNCHES 100000u
/* Elements per operand: kernels index with 32 bits; 16 spare for vector tails. */
#define HL_MAX_OPERAND_ELEMENTS ((1ull << 32) - 16)
/* Attention's largest head dimension (every kernel, forward and backward). */
#define HL_ATTENTION_MAX_HEAD_DIM 256u

/* ---- device capabilities ------------------------------------------------ */
typedef struct hl_coop_shape { /* one VkCooperativeMatrixPropertiesKHR row */
    uint32_t m, n, k;
    hl_dtype a, b, c, result;            /* component types we understand; others skipped */
    int a_raw, b_raw, c_raw, result_raw; /* raw VkComponentTypeKHR values */
    int saturating;
    int scope; /* raw VkScopeKHR */
} hl_coop_shape;

#define HL_MAX_COOP_SHAPES 64
typedef struct hl_caps {
    char name[256];
    uint32_t vendor_id, device_id, driver_version, api_version;
    char driver_name[256], driver_info[256];
    int device_type; /* raw VkPhysicalDeviceType */
    uint32_t subgroup_size, min_subgroup_size, max_subgroup_size;
    uint32_t shared_memory_bytes, max_workgroup_invocations;
    uint32_t max_group_count[3];
    uint64_t max_storage_buffer_range, max_allocation_bytes, device_local_heap_bytes;
    uint64_t storage_offset_alignment; /* minStorageBufferOffsetAlignment: where a tensor view may start */
    float timestamp_period_ns;
    uint32_t timestamp_valid_bits;
    int has_coop, has_coop2, has_bf16, has_fp16, has_subgroup_size_control;
    int has_int16, has_buffer_arrays; /* shaderInt16; buffer arrays indexed (persistent runs) */
    /* VK_KHR_shader_bfloat16 with shaderBFloat16Type and shaderBFloat16CooperativeMatrix
     * (the table then has bf16 rows): the bfloat16 cooperative-matrix kernels can run */
    int bf16_coop;
    int external_memory_fd;    /* VK_KHR_external_memory_fd: tensors CUDA can import */
    int external_semaphore_fd; /* + VK_KHR_external_semaphore_fd and timeline semaphores: ordering with CUDA */
    int has_timeline;          /* timeline semaphores (host-driven ordering, hl_async_open_host) */
    /* VK_KHR_global_priority or VK_EXT_global_priority (1 / 2; 0: neither): the queue's
     * priority among the GPU's contexts can be asked for (HELIOS_QUEUE_PRIORITY) */
    int global_priority_ext;
    int queue_priority_asked;   /* VkQueueGlobalPriority asked for; 0: none (the driver's default) */
    int queue_priority;         /* the one the queue got; 0: the driver's default */
    int queue_priority_refused; /* asked for, and the driver answered VK_ERROR_NOT_PERMITTED */
    uint32_t queue_family;      /* the queue's family (HELIOS_QUEUE_FAMILY picks one) */
    int queue_family_graphics;  /* and whether that family also does graphics */
    uint32_t n_coop_shapes;
    hl_coop_shape coop_shapes[HL_MAX_COOP_SHAPES];
    uint32_t sm_count; /* streaming multiprocessors (VK_NV_shader_sm_builtins), 0: unknown */
    /* identity (VkPhysicalDeviceIDProperties; PCI from VK_EXT_pci_bus_info where offered) */
    uint8_t uuid[16], driver_uuid[16], luid[8];
    int luid_valid, has_pci;
    uint32_t pci_domain, pci_bus, pci_device, pci_function;
    int has_pipeline_stats; /* VK_KHR_pipeline_executable_properties */
    int has_device_clock;   /* VK_KHR_shader_clock's shaderDeviceClock (HELIOS_PLAN_TRACE) */
    uint32_t n_coop2_flex;  /* VK_NV_cooperative_matrix2 flexible-dimension rows */
    uint32_t coop2_workgroup_scope_max_invocations;
    /* the coop2 path needs workgroup scope, flexible dimensions and tensor addressing */
    int coop2_usable;
    int coop2_workgroup_scope, coop2_flexible_dimensions, coop2_tensor_addressing;
    int coop2_conversions; /* an accumulator converted to an A operand (the attention forward's P) */
    struct hl_coop2_flex { /* the rows with f16 A/B (others are skipped) */
        uint32_t m_gran, n_gran, k_gran, invocations;
        hl_dtype c, result;
        int scope; /* raw VkScopeKHR */
    } coop2_flex[HL_MAX_COOP_SHAPES];
    uint32_t n_coop2_flex_f16;
} hl_caps;

/* ---- variants ----------------------------------------------------------- */
/* hl_path, the variant structs (hl_variant, hl_attn_variant), the shader enum
 * and each kernel family's constants are generated from shaders/families.py. */
#include "hl_kernels.h"

#define HL_VARIANT_STR_MAX 128
/* Canonical string, e.g.
 * coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:splitk=1:raster=8.
 * Parsing also takes the older 7-field form (splitk=1, raster=1). The opt-in NV
 * cooperative matrix 2 family: coop2:tile128x128x32:wg256:acc=f32:raster=8. */
void hl_variant_format(const hl_variant *v, char *out, size_t cap);
hl_status hl_variant_parse(const char *s, hl_variant *out, hl_error *err);

/* ---- the engine --------------------------------------------------------- */
typedef struct hl_device hl_device;

typedef struct hl_device_options {
    int index;         /* -1: HELIOS_DEVICE or the first suitable device */
    int disable_coop;  /* also HELIOS_DISABLE_COOP=1 */
    int disable_coop2; /* also HELIOS_DISABLE_COOP2=1 */
} hl_device_options;

hl_status hl_device_count(uint32_t *count, hl_error *err);
hl_status hl_device_create(const hl_device_options *opt, hl_device **out, hl_error *err);
void hl_device_destroy(hl_device *dev); /* NULL-safe */
const hl_caps *hl_device_caps(const hl_device *dev);
int hl_device_coop_enabled(const hl_device *dev);
/* Where a cooperative-matrix shape keeps its fp32 accumulator's elements (layout.c,
 * probed at open): element i of a lane lies in row slot (i >> shift) & (slots - 1),
 * and lanes lane ^ m, m within `lanes`, hold the same rows in the same slots. */
#define HL_MAX_ROWS_LAYOUTS 8
typedef struct hl_rows_layout {
    uint32_t tm, tn, tk;
    int ok; /* the layout has that shape (the attention forward may keep its rows in registers) */
    uint32_t slots, shift, lanes;
    char why[256]; /* !ok: what the probe found */
} hl_rows_layout;
/* The i-th probed layout (one per f16 -> f32 shape), NULL past the last. */
const hl_rows_layout *hl_device_rows_layout(const hl_device *dev, uint32_t i);
/* Frees the device-local scratch buffers host-array products reuse (they are
 * made again on demand); tensors and pipelines stay. */
void hl_device_release_scratch(hl_device *dev);
int hl_device_coop2_enabled(const hl_device *dev);
/* How long a wait for the GPU polls before its thread sleeps (HELIOS_WAIT_SPIN_US). */
uint32_t hl_device_wait_spin_us(const hl_device *dev);

/* Validates v for this device and input type (HL_F16 or HL_BF16); the message says
 * which limit or table row fails. */
hl_status hl_variant_check(const hl_device *dev, const hl_variant *v, hl_dtype in, hl_error *err);
/* How this device runs bfloat16: NULL when its cooperative-matrix kernels can run,
 * else the reason they cannot (bfloat16 then takes the scalar fp32 path). */
const char *hl_bf16_coop_unavailable(const hl_device *dev);
/* The variant used when none is asked for (environment switches applied). */
hl_status hl_variant_default(const hl_device *dev, hl_variant *out, hl_error *err);
/* The environment switch that chooses the kernel (HELIOS_VARIANT, HELIOS_COOP_*),
 * or "disable_coop" where coop was switched off on a device that has it; NULL
 * when none is active. The one list of such switches: tuned picks and shape
 * heuristics apply only when this is NULL. */
const char *hl_variant_override(const hl_device *dev);
/* The default for one product: hl_variant_default with split-K and block size
 * chosen for the grid this shape makes (unless hl_variant_override is set). */
hl_status hl_variant_for_shape(const hl_device *dev, uint32_t m, uint32_t n, uint32_t k, hl_variant *out,
                               hl_error *err);
/* The default for a batch of `batch` products of m x n x k: the one place the
 * batch rule lives (as for batch * m rows, no split-K). */
hl_status hl_variant_for_product(const hl_device *dev, uint32_t m, uint32_t n, uint32_t k, uint64_t batch,
                                 hl_variant *out, hl_error *err);
/* The default for inputs of type `in`: the matrix-vector kernel for M <= HL_GEMV_MAX_ROWS (B as N x K
 * where trans_b), else hl_variant_for_product for HL_F16 and for HL_BF16 its tiles on a bf16 -> f32 coop
 * shape, or the scalar path where the device has no bfloat16 cooperative matrices (never fp16: its range). */
#define HL_GEMV_MAX_ROWS 8u /* matmul_gemv.comp also takes this many rows of A a workgroup */
hl_status hl_variant_for_input(const hl_device *dev, uint32_t m, uint32_t n, uint32_t k, uint64_t batch, hl_dtype in,
                               int trans_b, hl_variant *out, hl_error *err);
/* Every variant valid on this device; returns how many were written (<= cap). */
size_t hl_variant_list(const hl_device *dev, hl_variant *out, size_t cap);

/* ---- device-resident tensors ------------------------------------------- */
/* A device-local buffer owned by the caller. It stays valid until
 * hl_tensor_destroy; closing its device releases the Vulkan memory early and
 * leaves the handle dead (hl_tensor_alive = 0, every use fails cleanly). */
typedef struct hl_tensor hl_tensor;
hl_status hl_tensor_create(hl_device *dev, uint64_t bytes, hl_tensor **out, hl_error *err);
/* The same in memory CUDA can import (a dedicated allocation exported as an opaque fd). */
hl_status hl_tensor_create_exportable(hl_device *dev, uint64_t bytes, hl_tensor **out, hl_error *err);
int hl_tensor_exportable(const hl_tensor *t);
/* CUDA interop (the NVIDIA driver's libcuda, opened at run time): an exportable
 * tensor's CUDA pointer, mapped on first use and kept until the tensor is freed,
 * and the CUDA ordinal of its device (matched by UUID). Each call counts one live
 * export until hl_tensor_export_done; HL_ERR_UNSUPPORTED naming what is missing. */
hl_status hl_tensor_cuda_export(hl_tensor *t, uint64_t *ptr, int *ordinal, hl_error *err);
/* The other way: a tensor over a whole segment of the CUDA pool torch allocates
 * from (helios_cuda_alloc), imported with no copy; views of it are torch's tensors. */
hl_status hl_tensor_import_cuda_segment(hl_device *dev, uint64_t segment, hl_tensor **out, hl_error *err);
/* A second tensor over an exportable tensor's memory, through the same fd export and
 * import (the import path, tested where no CUDA exists). */
hl_status hl_tensor_reimport(hl_tensor *src, hl_tensor **out, hl_error *err);
/* Which live pool segment holds [ptr, ptr + bytes) (1) or none (0), and the pool's size. */
int hl_cuda_pool_lookup(uint64_t ptr, uint64_t bytes, uint64_t *segment, uint64_t *base, uint64_t *size, int *device);
void hl_cuda_pool_usage(uint64_t *segments, uint64_t *bytes);
const char *hl_cuda_pool_last_error(void);
/* A HELIOS_* on/off switch (env.c): unset or empty is off; 1/true/yes/on or
 * 0/false/no/off; anything else HL_ERR_INVALID_ARGUMENT naming the variable. */
hl_status hl_env_flag(const char *name, int *out, hl_error *err);
/* A VkQueueGlobalPriority as HELIOS_QUEUE_PRIORITY spells it; "default" for 0 (none asked). */
const char *hl_queue_priority_name(int priority);
void hl_tensor_export_done(hl_tensor *t);
uint64_t hl_tensor_exports(const hl_tensor *t);        /* its exports not yet done */
uint64_t hl_device_live_exports(const hl_device *dev); /* exports not yet done */
void hl_tensor_destroy(hl_tensor *t);                  /* NULL-safe; also after its device closed */
int hl_tensor_alive(const hl_tensor *t);
const hl_device *hl_tensor_device(const hl_tensor *t);
uint64_t hl_tensor_bytes(const hl_tensor *t);
/* A view of `bytes` bytes of base's memory from `offset` (a slice: no copy). The
 * offset must be a multiple of the device's storage-buffer offset alignment
 * (caps.storage_offset_alignment) and the range inside base. A view can be an
 * operand, never an output; its owner must outlive it (hl_tensor_destroy the
 * view first); closing the device leaves both dead. */
hl_status hl_tensor_view(hl_tensor *base, uint64_t offset, uint64_t bytes, hl_tensor **out, hl_error *err);
hl_status hl_tensor_write(hl_tensor *t, uint64_t offset, const void *src, uint64_t bytes, hl_error *err);
hl_status hl_tensor_read(hl_tensor *t, uint64_t offset, void *dst, uint64_t bytes, hl_error *err);
typedef enum hl_activation { HL_ACT_NONE = 0, HL_ACT_RELU = 1, HL_ACT_GELU_TANH = 2, HL_ACT_SILU = 3 } hl_activation;

/* One product, or `batch` of them:
 *   C[b] = act(alpha * op(A[b]) op(B[b]) + beta * C[b] + bias)
 * op(X) is X or, with trans_*, the transpose of the stored X. A is stored M x K
 * (K x M transposed) with row pitch lda, B K x N (N x K) with pitch ldb; 0 =
 * packed. stride_a/stride_b: elements between batches (0: the same operand for
 * every batch). C is packed M x N per batch. Each operand is either host memory
 * or a tensor (t_*: device-resident, no copy). */
/* What a call reports back: the variant that ran and the GPU time of its single
 * dispatch (iters = 0) or of its last timed sample (0 without timestamps). */
typedef struct hl_run_info {
    double gpu_ms;
    char variant[HL_VARIANT_STR_MAX];
} hl_run_info;

typedef struct hl_matmul_args {
    uint32_t m, n, k;
    hl_dtype in_dtype, out_dtype;
    const void *a, *b;         /* host operands in in_dtype (when t_a/t_b are NULL) */
    void *c;                   /* host C in out_dtype; NULL: not read back */
    const hl_variant *variant; /* NULL: the default */
    /* timing: iters > 0 records warmup+iters dispatches in one submission,
     * each bracketed by GPU timestamps; samples_ms gets `iters` values. */
    uint32_t warmup, iters;
    double *samples_ms;
    double *batch_ms;     /* optional: (last end - first start)/iters, back to back */
    uint64_t flush_bytes; /* > 0: overwrite this many bytes before each timed sample,
                             outside its timestamps, to evict C/A/B from L2 (cold mode) */
    /* layouts and batches */
    uint32_t batch; /* 0 or 1: one product */
    int trans_a, trans_b;
    uint32_t lda, ldb;
    uint64_t stride_a, stride_b;
    /* epilogue */
    const float *bias; /* host: n fp32 values (or t_bias) */
    hl_activation act;
    int scale; /* 1: alpha and beta below apply; 0: alpha 1, beta 0 */
    float alpha, beta;
    const void *c_in; /* host C read when beta != 0 (out_dtype, packed); with
                         t_c the tensor's contents are read instead */
    /* device-resident operands */
    hl_tensor *t_a, *t_b, *t_c, *t_bias;
    hl_run_info *info; /* optional out */
    /* signal_value > 0: ordered with CUDA (hl_async_values), not waited for; tensors only */
    uint64_t wait_value, signal_value;
} hl_matmul_args;

hl_status hl_matmul(hl_device *dev, const hl_matmul_args *args, hl_error *err);
/* Bytes each operand spans for these arguments (pitches, batches, strides and
 * output dtype applied), as hl_matmul reads and writes them. */
void hl_matmul_sizes(const hl_matmul_args *args, uint64_t *a_bytes, uint64_t *b_bytes, uint64_t *c_bytes);

/* A chain: n_ops products on tensors only (every t_a, t_b, t_c set; host
 * pointers and timing fields ignored), recorded into one command buffer with a
 * barrier between dependent operations, submitted once. iters > 0 runs the whole
 * chain warmup + iters times in that submission, each of the iters between two
 * GPU timestamps (samples_ms, per chain). */
hl_status hl_matmul_chain(hl_device *dev, const hl_matmul_args *ops, uint32_t n_ops, uint32_t warmup, uint32_t iters,
                          double *samples_ms, hl_run_info *info, hl_error *err);

/* The cooperative-matrix MMA roof (roof.c): `reps` timed dispatches of `groups`
 * workgroups, each of 4 subgroups running `iters` x 4 independent MMAs of
 * tm x tn x tk on register-resident fragments (f16 inputs, acc accumulators);
 * *flops is the work of one dispatch. */
typedef struct hl_roof_args {
    uint32_t tm, tn, tk;
    hl_dtype acc;
    uint32_t iters, groups, warmup, reps;
    double *samples_ms; /* reps values */
} hl_roof_args;
hl_status hl_mma_roof(hl_device *dev, const hl_roof_args *args, double *flops, hl_error *err);

/* Driver statistics of the kernel a variant compiles to (registers, shared
 * memory, binary size, ... as VK_KHR_pipeline_executable_properties reports
 * them); n = 0 where the driver offers none. Builds the pipeline if needed. */
#define HL_MAX_STATS 24
typedef struct hl_kernel_stat {
    char name[64];
    double value;
} hl_kernel_stat;
typedef struct hl_kernel_stats {
    uint32_t n;
    hl_kernel_stat items[HL_MAX_STATS];
    /* What the driver was given to compile: FNV-1a 64 over the permutation's
     * SPIR-V, its specialization constants and the required subgroup size. Equal
     * digests on one driver are the same kernel (a result row's identity). */
    uint64_t code_digest;
    const void *pipeline; /* the device's pipeline these describe (hl_kernel_machine_code) */
} hl_kernel_stats;
hl_status hl_kernel_stats_get(hl_device *dev, const hl_variant *v, hl_dtype in_dtype, hl_dtype out_dtype,
                              hl_kernel_stats *out, hl_error *err);
/* What the driver compiled the kernel of ks to, as its VkPipelineCache serialises it:
 * the pipeline compiled again into an empty cache of its own, and that cache's data
 * (header included; the format is the driver's). *data is malloc'd (free it); size 0
 * where the driver keeps nothing in a pipeline cache. */
hl_status hl_kernel_machine_code(hl_device *dev, const hl_kernel_stats *ks, void **data, size_t *size, hl_error *err);

/* Test-only fault injection (HELIOS_FAULT=KIND:N, see fault.c): how many calls
 * of KIND ("buffer", "alloc", "map", "pipeline", "submit") the current setting saw. */
unsigned long hl_fault_count(const char *kind);

/* The pipeline cache file (NULL: not persisted), the bytes loaded from it at
 * open, and why a file was ignored (NULL: nothing to say). */
const char *hl_pipeline_cache_info(const hl_device *dev, uint64_t *loaded_bytes, const char **note);

/* HELIOS_PIPELINE_IR's directory (NULL: unset), the files written there since
 * the device opened, and the first reason one was not (NULL: nothing to say). */
const char *hl_pipeline_ir_info(const hl_device *dev, uint32_t *files, const char **note);

/* ---- telemetry ---------------------------------------------------------- */
typedef struct hl_telemetry {
    uint64_t matmuls, coop_matmuls, dispatches, barriers, submits;
    uint64_t overlapped; /* operations of a group recorded with no barrier before them */
    uint64_t bytes_up, bytes_down;
    uint64_t pipeline_compiles;
    double pipeline_compile_ms, record_ms, submit_wait_ms;
    /* host time of operations ordered with CUDA, per part (where a call's host time goes) */
    double plan_ms, async_slot_ms, async_descriptor_ms, async_submit_ms, cuda_call_ms;
    /* GPU time of the ordered operations read so far (timestamps around each
     * submission), and how many: what a torch program spent in Helios kernels */
    double async_gpu_ms;
    uint64_t async_timed;
    double last_gpu_ms; /* GPU time of the last dispatch (timestamps) */
    char last_variant[HL_VARIANT_STR_MAX];
    /* Vulkan objects this device holds now (not reset): buffers, memory
     * allocations, pipelines. A failed call must leave them balanced. */
    uint64_t live_buffers, live_memory, live_pipelines;
    uint64_t device_bytes, peak_device_bytes; /* device-local memory held now / at most */
    uint64_t tensors, chains, chain_ops;
    uint64_t attentions, coop_attentions;
    uint64_t cuda_imports; /* tensors mapped into CUDA now (not reset) */
} hl_telemetry;

void hl_telemetry_get(const hl_device *dev, hl_telemetry *out);
/* The same after reading the GPU time of ordered operations finished since. */
void hl_telemetry_collect(hl_device *dev, hl_telemetry *out);
void hl_telemetry_reset(hl_device *dev);

#ifdef __cplusplus
}
#endif
#endif
