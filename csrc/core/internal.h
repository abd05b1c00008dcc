/* internal.h — what the core's files share; never included by the binding. */
#ifndef HELIOS_INTERNAL_H
#define HELIOS_INTERNAL_H

#define VK_NO_PROTOTYPES /* entry points come from the loader at run time (vkload.c) */
#include <vulkan/vulkan.h>
#include "grammar.h"
#include "async.h"
#include "buffer.h"
#include "cuda_link.h"
#include "hazard.h"
#include "helios_attention.h"
#include "helios_core.h"
#include "helios_elementwise.h"
#include "helios_ordering.h"
#include "hl_layouts.h"
#include "pipeline_store.h"
#include "plan_policy.h"
#include "vkfuncs.h"

/* VK_KHR_shader_bfloat16 (Vulkan headers from 1.4.311 on): declared here for older
 * headers, with the values the specification assigns. */
#ifdef VK_KHR_shader_bfloat16
#define HL_COMPONENT_BFLOAT16 VK_COMPONENT_TYPE_BFLOAT16_KHR
#define HL_STYPE_BF16_FEATURES VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR
typedef VkPhysicalDeviceShaderBfloat16FeaturesKHR hl_bf16_features;
#else
#define HL_COMPONENT_BFLOAT16 1000141000
#define HL_STYPE_BF16_FEATURES ((VkStructureType)1000141000)
typedef struct hl_bf16_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 shaderBFloat16Type;
    VkBool32 shaderBFloat16DotProduct;
    VkBool32 shaderBFloat16CooperativeMatrix;
} hl_bf16_features;
#endif

/* Loads the Vulkan loader once; HL_ERR_NO_DEVICE naming the package if absent. */
hl_status hl_vk_load(hl_error *err);

/* Every Vulkan call goes through this: on failure the error names the call,
 * the file and line, and the VkResult. Jumps to the local `fail` label so the
 * function's cleanup runs on every path. */
#define HL_VK(call)                                                                                                    \
    do {                                                                                                               \
        VkResult hl_vr_ = (call);                                                                                      \
        if (hl_vr_ != VK_SUCCESS) {                                                                                    \
            st = hl_vk_fail(err, hl_vr_, #call, __FILE__, __LINE__);                                                   \
            goto fail;                                                                                                 \
        }                                                                                                              \
    } while (0)

/* The same, for calls that fault injection (fault.c) may replace by an error. */
#define HL_VK_FAULT(kind, call)                                                                                        \
    do {                                                                                                               \
        VkResult hl_vr_ = hl_fault(kind);                                                                              \
        if (hl_vr_ == VK_SUCCESS) hl_vr_ = (call);                                                                     \
        if (hl_vr_ != VK_SUCCESS) {                                                                                    \
            st = hl_vk_fail(err, hl_vr_, #call, __FILE__, __LINE__);                                                   \
            goto fail;                                                                                                 \
        }                                                                                                              \
    } while (0)

typedef enum hl_fault_kind {
    HL_FAULT_BUFFER,
    HL_FAULT_ALLOC,
    HL_FAULT_MAP,
    HL_FAULT_PIPELINE,
    HL_FAULT_SUBMIT,
    HL_FAULT_OPEN,
    HL_FAULT_PROBE, /* the accumulator-layout probe of a device open (layout.c): not a Vulkan call */
    HL_FAULT_KINDS
} hl_fault_kind;
VkResult hl_fault(hl_fault_kind kind);
/* on = 1: from now until the matching hl_fault_suspend(0), no call fails or counts
 * (except HL_FAULT_PROBE, which only the suspended probe asks). */
void hl_fault_suspend(int on);

#define HL_TRY(expr)                                                                                                   \
    do {                                                                                                               \
        st = (expr);                                                                                                   \
        if (st != HL_OK) goto fail;                                                                                    \
    } while (0)

hl_status hl_vk_fail(hl_error *err, VkResult vr, const char *call, const char *file, int line);

hl_status hl_buffer_create(hl_device *dev, VkDeviceSize size, int host_visible, hl_buffer *out, hl_error *err);
/* Device-local, a dedicated allocation exportable as an opaque fd (CUDA interop). */
hl_status hl_buffer_create_exportable(hl_device *dev, VkDeviceSize size, hl_buffer *out, hl_error *err);
/* Frees b (kept in the graveyard while an abandoned submission may use it: interrupt.c). */
void hl_buffer_destroy(hl_device *dev, hl_buffer *b);
void hl_buffers_release_graveyard(hl_device *dev);
/* A buffer over `bytes` of memory exported as an opaque fd (CUDA's pool segments; a
 * dedicated Vulkan allocation with dedicated = 1): Vulkan owns fd once this
 * succeeds; the caller closes it otherwise. */
hl_status hl_buffer_import_fd(hl_device *dev, int fd, VkDeviceSize bytes, int dedicated, hl_buffer *out, hl_error *err);
/* Grows `b` to at least `size` (contents not kept). */
hl_status hl_buffer_reserve(hl_device *dev, hl_buffer *b, VkDeviceSize size, int host_visible, hl_error *err);

/* Shader permutations compiled at build time, in hl_shader order (from shaders/families.py). */
typedef struct hl_spirv {
    const char *name;
    const uint32_t *code;
    size_t size_bytes;
    const char *missing; /* no code: the compiler feature the build's glslc lacked */
} hl_spirv;
extern const hl_spirv hl_spirv_table[HL_SHADER_COUNT];

typedef struct hl_profile {
    int on;
    VkQueryPool pool;
    uint32_t capacity, limit, n, dropped; /* the pool's queries, this profile's, written, not written */
    uint8_t kinds[HL_PROFILE_MAX];        /* hl_profile_kind of each timestamp written */
} hl_profile;

/* Pipelines: one per (shader, specialization constants), built lazily, cached. */
#define HL_MAX_SPEC 20
typedef struct hl_pipeline {
    hl_shader shader;
    uint32_t spec[HL_MAX_SPEC];
    uint32_t n_spec;
    uint32_t required_subgroup; /* 0: none requested */
    VkPipeline pipeline;
    hl_kernel_stats stats; /* empty where the driver offers none */
    struct hl_pipeline *next;
} hl_pipeline;

hl_status hl_pipeline_get(hl_device *dev, hl_shader shader, const uint32_t *spec, uint32_t n_spec,
                          uint32_t required_subgroup, hl_pipeline **out, hl_error *err);
void hl_pipelines_destroy(hl_device *dev);
/* HELIOS_PIPELINE_IR (pipeline_ir.c): the directory (NULL: unset), and a pipeline's dump. */
const char *hl_pipeline_ir_dir(void);
void hl_pipeline_ir_dump(hl_device *dev, const hl_pipeline *p);

struct hl_device {
    VkInstance instance;
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    VkCommandPool cmd_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    uint32_t wait_spin_us; /* how long a wait polls the fence before it sleeps (HELIOS_WAIT_SPIN_US) */
    int abandoned;         /* a submission whose wait was interrupted still runs behind `fence` */
    hl_buffer *graveyard;  /* memory freed meanwhile, released once it is done (interrupt.c) */
    uint32_t n_graveyard, cap_graveyard;
    VkDescriptorSetLayout ds_layout;         /* set 0: every kernel's slots */
    VkDescriptorSetLayout ds_layout_persist; /* set HL_PERSIST_SET: a persistent run's members' buffers */
    VkPipelineLayout pipe_layout;            /* both sets; a kernel other than a run's binds set 0 only */
    VkDescriptorPool ds_pool;                /* sets for one submission; reset before each */
    uint32_t ds_capacity;
    VkQueryPool query_pool;
    uint32_t query_capacity;
    VkPhysicalDeviceMemoryProperties mem_props;
    hl_caps caps;
    int bf16_coop_enabled;                         /* caps.bf16_coop, kernels built, HELIOS_DISABLE_BF16_COOP unset */
    int coop_enabled, coop2_enabled, gemv_enabled; /* the kernel switches */
    int timestamps_ok;
    hl_plan_policy plan_policy; /* what plans do with their steps (set at open from the switches) */
    hl_pipeline *pipelines;
    hl_rows_layout rows_layouts[HL_MAX_ROWS_LAYOUTS]; /* per f16 -> f32 coop shape, probed at open (layout.c) */
    uint32_t n_rows_layouts;
    hl_pipeline_store store; /* the persisted pipeline cache and the IR files (runtime/) */
    uint64_t compiles_total; /* pipelines compiled since open (telemetry resets; this does not) */
    /* workspace reused across calls, grown on demand */
    hl_buffer buf_a, buf_b, buf_c, buf_w, buf_bias, staging, flush; /* buf_w: split-K workspace */
    hl_buffer buf_rows;                      /* fp32 per attention row: a host-bound LSE, the backward's delta */
    struct hl_tensor *tensors;               /* live tensors, released when the device closes */
    struct hl_plan *plans;                   /* live plans (plan.c), released likewise */
    struct hl_capture *captures, *capturing; /* live captures (capture.c), the one recording */
    PFN_vkGetMemoryFdKHR get_memory_fd;      /* VK_KHR_external_memory_fd, where enabled */
    PFN_vkGetSemaphoreFdKHR get_semaphore_fd;
    PFN_vkWaitSemaphores wait_semaphores;
    PFN_vkSignalSemaphore signal_semaphore;
    PFN_vkGetSemaphoreCounterValue semaphore_value;
    hl_async async;        /* submissions that do not wait: the timeline, the ring (runtime/async.h) */
    hl_group group;        /* the open group of ordered operations (runtime/async.h) */
    hl_profile profile;    /* per-operation timestamps while on (profile.c) */
    hl_cuda_link cuda;     /* CUDA interop (runtime/cuda_link.h), once attached */
    uint64_t live_exports; /* DLPack exports a consumer still holds (close waits for none) */
    hl_telemetry tel;
};

double hl_now_ms(void);

/* The persisted pipeline cache (pipeline_cache.c): opened with the device, its
 * data written back when the device closes. */
hl_status hl_pipeline_cache_open(hl_device *dev, hl_error *err);
void hl_pipeline_cache_close(hl_device *dev);

struct hl_tensor {
    hl_device *dev; /* NULL once the device closed */
    hl_buffer buf;  /* a view's is its owner's (never freed through the view) */
    uint64_t bytes;
    uint64_t offset;  /* bytes into buf where this tensor starts (views; 0 otherwise) */
    int is_view;      /* a slice of another tensor's memory (hl_tensor_view) */
    uint64_t exports; /* DLPack exports of it a consumer still holds */
    struct hl_tensor *prev, *next;
};
void hl_tensors_release(hl_device *dev); /* device close: free every tensor's memory */
void hl_tensors_detach(hl_device *dev);  /* a device left to process exit: its tensors die, their memory stays */
/* Whether two tensors (either may be NULL) use the same memory: the same tensor,
 * or views of one buffer. */
int hl_tensors_share(const hl_tensor *a, const hl_tensor *b);

/* CUDA interop (cuda.c): the driver opened at run time. */
hl_status hl_cuda_ordinal(hl_device *dev, int *ordinal, hl_error *err);
hl_status hl_cuda_import(hl_device *dev, hl_buffer *b, uint64_t bytes, hl_error *err);
void hl_cuda_release(hl_device *dev, hl_buffer *b); /* before the buffer is destroyed */
void hl_cuda_detach(hl_device *dev);                /* device close, after every release */
/* The timeline semaphore imported into CUDA, and CUDA stream work on it. */
hl_status hl_cuda_import_semaphore(hl_device *dev, int fd, hl_error *err);
/* The pool of CUDA virtual-memory segments torch allocates from (process-wide;
 * lookups in helios_core.h): allocate and free a segment (exported as an fd), and
 * a dup of a live segment's fd for a Vulkan import. */
hl_status hl_cuda_pool_alloc(uint64_t size, int device, uint64_t *out, hl_error *err);
void hl_cuda_pool_free(uint64_t ptr);
hl_status hl_cuda_pool_dup(uint64_t id, int *fd, uint64_t *size, int *device, hl_error *err);
hl_status hl_cuda_stream_signal(hl_device *dev, uint64_t stream, uint64_t value, hl_error *err);
hl_status hl_cuda_stream_wait(hl_device *dev, uint64_t stream, uint64_t value, hl_error *err);
void hl_cuda_release_semaphore(hl_device *dev);
/* async.c */
hl_status hl_async_open(hl_device *dev, hl_error *err);
void hl_async_close(hl_device *dev);
hl_status hl_async_slot(hl_device *dev, struct hl_ring_slot **out, hl_error *err);
/* Host wait until every async submission finished: before memory they may use is
 * freed or replaced (a no-op when none is pending). */
void hl_async_quiesce(hl_device *dev);
/* Destroys the retired scratch buffers whose work is done (all = 1: every one;
 * after hl_async_quiesce, at close). */
void hl_async_release_retired(hl_device *dev, int all);
/* While a profile is on: a timestamp into cmd (a submission's start, or an op's end). */
void hl_profile_mark(hl_device *dev, VkCommandBuffer cmd, hl_profile_kind kind);
void hl_profile_close(hl_device *dev);
/* Adds the GPU time of every finished ordered submission not read yet to the
 * telemetry (async_gpu_ms, async_timed); unfinished ones are left for later. */
void hl_async_collect(hl_device *dev);
/* Milliseconds between two timestamps of this device's queue. */
double hl_ticks_ms(const hl_device *dev, uint64_t t0, uint64_t t1);

/* Fill the capability report (caps.c); also tells which extensions and features
 * the logical device enables. */
hl_status hl_query_caps(hl_device *dev, hl_error *err);

/* Descriptor sets for `count` operations of one submission (pool reset first). */
hl_status hl_descriptor_sets(hl_device *dev, uint32_t count, VkDescriptorSet *out, hl_error *err);

/* Strict environment switches (env.c): unset or empty is off / -1 (hl_env_flag is
 * public: helios_core.h). */
hl_status hl_env_index(const char *name, int *out, hl_error *err);
/* An integer 0..max; unset or empty is dflt. */
hl_status hl_env_uint(const char *name, uint32_t max, uint32_t dflt, uint32_t *out, hl_error *err);
/* HELIOS_QUEUE_PRIORITY: low / medium / high / realtime as a VkQueueGlobalPriority, 0 unset. */
hl_status hl_env_queue_priority(int *out, hl_error *err);

#define HL_MAX_SPLITK 16u

/* The table row m x n x k with `in` x `in` -> acc at subgroup scope, or NULL. */
const hl_coop_shape *hl_find_coop_shape(const hl_caps *c, uint32_t m, uint32_t n, uint32_t k, hl_dtype in,
                                        hl_dtype acc);
/* The shared memory a matmul_coop variant's kernel declares (variant.c): what refuses a
 * variant past the device's limit, and the count the kernel checks itself against
 * (SHARED_BYTES). */
uint32_t hl_coop_shared_bytes(const hl_variant *v);
/* Coop tiles per subgroup (a side) that make the wide default's 64x64 subgroup block. */
uint32_t hl_wide_tiles(uint32_t t);
/* Preference among the device's coop shapes (higher first; measured, not assumed). */
int hl_coop_shape_rank(const hl_coop_shape *s);
/* The scalar fallback every device runs. */
extern const hl_variant hl_scalar_variant;
/* layout.c: each f16 -> f32 shape's layout, probed at open (failures recorded; NULL: not probed). */
void hl_rows_layouts_probe(hl_device *dev);
const hl_rows_layout *hl_rows_layout_find(const hl_device *dev, uint32_t tm, uint32_t tn, uint32_t tk);

/* Submissions (submit.c): what every operation's command buffer shares. */
VkDeviceSize hl_align_up(VkDeviceSize x, VkDeviceSize a);
void hl_cmd_barrier(hl_device *dev, VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
                    VkAccessFlags dst_access); /* into dev->cmd; _on: into cmd */
void hl_cmd_barrier_on(hl_device *dev, VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags src_access,
                       VkPipelineStageFlags dst, VkAccessFlags dst_access);
void hl_compute_barrier(hl_device *dev); /* compute writes -> compute reads and writes */
hl_status hl_ensure_queries(hl_device *dev, uint32_t count, hl_error *err);
/* One binding of an operation: a buffer and where in it the operand starts. */
typedef struct hl_binding {
    VkBuffer buffer;
    VkDeviceSize offset;
} hl_binding;
/* Writes slots 0..n-1 of a set (a kind's HL_BIND_*_COUNT); slots a kind does not
 * have stay unwritten (its shaders do not declare them). */
void hl_write_set(hl_device *dev, VkDescriptorSet ds, const hl_binding *bufs, uint32_t n);
hl_status hl_begin_commands(hl_device *dev, uint32_t n_queries, hl_error *err);
hl_status hl_submit_wait(hl_device *dev, hl_error *err); /* dev->cmd; hl_submit_cmd: cmd, no wait */
hl_status hl_submit_cmd(hl_device *dev, VkCommandBuffer cmd, hl_error *err);
/* cmd submitted after the timeline reaches wait, signalling signal (the pair checked: in order). */
hl_status hl_check_async_values(const hl_device *dev, uint64_t wait, uint64_t signal, hl_error *err);
hl_status hl_submit_timeline(hl_device *dev, VkCommandBuffer cmd, uint64_t wait, uint64_t signal, hl_error *err);
/* interrupt.c: the wait for dev->fence (HL_ERR_INTERRUPTED leaves the device abandoned), the
 * wait for an abandoned submission before the next, and at destroy: 1 when it still runs. */
hl_status hl_wait_fence(hl_device *dev, hl_error *err);
#define HL_WAIT_SPIN_US 10000u /* a GPU wait's poll by default: a decode step of an 8B model */
hl_status hl_settle(hl_device *dev, hl_error *err);
int hl_device_abandon(hl_device *dev);
hl_status hl_read_pair(hl_device *dev, uint32_t first, double *ms, hl_error *err);
/* A tensor operand: alive, on this device, at least `need` bytes (NULL passes). */
hl_status hl_check_tensor(hl_device *dev, const hl_tensor *t, uint64_t need, const char *who, const char *name,
                          hl_error *err);
/* An operand's binding: the tensor's (at its offset), else the scratch buffer host data goes through. */
hl_binding hl_tensor_or_scratch(const hl_tensor *t, const hl_buffer *scratch);
/* An output tensor: as hl_check_tensor, and a slice view only of whole 4-byte words
 * (synchronous outputs are poisoned with whole-word fills). */
hl_status hl_check_output_tensor(hl_device *dev, const hl_tensor *t, uint64_t need, const char *who, const char *name,
                                 hl_error *err);
/* The timed dispatch sequence: rec(dev, ctx, ds) records one operation (ds: the
 * set hl_exec_run wrote, or VK_NULL_HANDLE); iters = 0 records it once between
 * two timestamps. with_batch: after the samples, `iters` more back to back
 * between two timestamps (the batch figure). hl_timed_queries: the queries it uses. */
typedef void (*hl_record_fn)(hl_device *dev, const void *ctx, VkDescriptorSet ds);
/* What most operations record: one dispatch of one pipeline over a 2-D grid with
 * its push constants (hl_record_dispatch is the record function of such a plan). */
typedef struct hl_dispatch_plan {
    VkPipeline pipe;
    uint32_t grid[2];
    hl_push pc;
} hl_dispatch_plan;
void hl_record_dispatch(hl_device *dev, const void *ctx, VkDescriptorSet ds);
uint32_t hl_timed_queries(uint32_t iters);
void hl_record_timed(hl_device *dev, uint32_t warmup, uint32_t iters, uint64_t flush_bytes, int with_batch,
                     hl_record_fn rec, const void *ctx, VkDescriptorSet ds);
/* Reads what hl_record_timed wrote: iters samples, the batch figure (when
 * batch_ms is given: it must have been recorded), and *gpu_ms: the single
 * dispatch's time (iters = 0) or the last sample. */
hl_status hl_read_timed(hl_device *dev, uint32_t iters, double *samples_ms, double *batch_ms, double *gpu_ms,
                        hl_error *err);

/* ---- one operation's submission (exec.c) ---------------------------------- */
/* What an op does to an operand (group barriers): unmarked counts as written (a barrier, never a race). */
typedef enum hl_access { HL_ACCESS_WRITE = 0, HL_ACCESS_READ = 1 } hl_access;
/* An operand: a tensor (bound in place) or, for host data, a scratch buffer. */
typedef struct hl_operand {
    hl_tensor *tensor;  /* bound at its offset (+ at) */
    hl_buffer *scratch; /* without a tensor: the device buffer host data goes through */
    const void *upload; /* host bytes copied in before the operation, or NULL */
    void *download;     /* host memory the operand is read back into after it, or NULL */
    uint64_t bytes;     /* its size: uploads and downloads move all of it */
    uint64_t at;        /* bytes into the tensor (a transfer of part of one) */
    int poison;         /* not uploaded: filled with all-ones (NaN) first */
    int slot;           /* binding slot of the kind's layout, or -1 */
    hl_access access;   /* what the kernel does to it: HL_ACCESS_WRITE (the default) unless marked read */
} hl_operand;

#define HL_EXEC_MAX_OPERANDS 12
typedef struct hl_exec {
    hl_operand *operands;
    uint32_t n_operands;
    uint32_t n_slots;    /* the kind's binding count (HL_BIND_*_COUNT); 0: no descriptor set */
    hl_record_fn record; /* NULL: a transfer */
    const void *ctx;
    uint32_t warmup, iters;
    uint64_t flush_bytes;
    int no_batch;          /* no back-to-back batch after the samples (chains) */
    uint64_t wait_value;   /* async (signal_value > 0): start when the timeline reaches wait_value, */
    uint64_t signal_value; /* signal this when done, return without waiting (tensors only, untimed) */
    double *samples_ms, *batch_ms;
    double gpu_ms; /* out: the single dispatch's GPU time, or the last sample's */
} hl_exec;
hl_status hl_exec_run(hl_device *dev, hl_exec *x, hl_error *err);
hl_binding hl_operand_binding(const hl_operand *o); /* its tensor's (at its offset + at), else its scratch */
/* An ordered op into cmd (grouped: a barrier only where it depends on the last ones; ds its set). */
hl_status hl_exec_record(hl_device *dev, VkCommandBuffer cmd, VkDescriptorSet ds, int grouped, hl_exec *x,
                         hl_error *err);
hl_status hl_capture_record(hl_device *dev, hl_exec *x, hl_error *err); /* while dev->capturing */
/* One kernel operation: operand i bound at slot i (n = the kind's binding count),
 * timed as asked; records `variant` as what ran (telemetry and *info, with the GPU time). */
typedef struct hl_exec_timing {
    uint32_t warmup, iters;
    uint64_t flush_bytes;
    double *samples_ms, *batch_ms;
    uint64_t wait_value, signal_value; /* async when signal_value > 0 (see hl_exec) */
} hl_exec_timing;
hl_status hl_exec_kernel(hl_device *dev, hl_operand *ops, uint32_t n, hl_record_fn record, const void *ctx,
                         const hl_exec_timing *timing, const char *variant, hl_run_info *info, hl_error *err);

/* ---- attention variants, both directions (attention_variant.c) ------------ */
/* The forward keeps its softmax rows in registers at head dimensions up to this (and
 * causal at any; attention_variant.c says where it was measured). */
#define HL_ATTN_ROWS_MAX_HEAD_DIM 64u
/* The forward kernel a coop variant runs at head dimension d: whether it folds each row's
 * running max into its score product (`fold`), keeps its softmax rows in registers
 * (`rows`: their accumulator layout, layout.c) and P too (`p_regs`). */
typedef struct hl_attn_fwd_kernel {
    int fold, p_regs;
    const hl_rows_layout *rows;
} hl_attn_fwd_kernel;
hl_status hl_attn_fwd_kernel_of(const hl_device *dev, const hl_attn_variant *v, uint32_t d, int causal,
                                hl_attn_fwd_kernel *k, hl_error *err);
/* The shared memory the forward kernel of v declares at head dimension d (SHARED_BYTES). */
hl_status hl_attn_fwd_shared_bytes(const hl_device *dev, const hl_attn_variant *v, uint32_t d, uint32_t *out,
                                   hl_error *err);
/* The device rules for a variant at head dimension d; backward: the backward
 * kernels' shared-memory budget and tile rules. */
hl_status hl_attn_check(const hl_device *dev, const hl_attn_variant *v, uint32_t d, hl_dtype in, int backward,
                        hl_error *err);
/* The arguments both directions check alike (who names the op in messages):
 * dimensions, timing fields, scale, the causal shape, operand sizes. */
hl_status hl_attn_check_call(const hl_device *dev, const char *who, uint64_t bh, uint64_t sq, uint64_t skv, uint64_t d,
                             int causal, float scale, uint32_t warmup, uint32_t iters, const double *samples_ms,
                             hl_error *err);
/* A layout's rules (hl_attn_layout) and the bytes Q (q_bytes), K and V (kv_bytes)
 * and O (o_bytes) span from their tensors' starts; the backward's gradients span
 * as their inputs. */
typedef struct hl_attn_spans {
    uint64_t q, kv, o;
} hl_attn_spans;
hl_status hl_attn_layout_check(const hl_device *dev, const char *who, const hl_attn_layout *l, uint64_t bh, uint64_t sq,
                               uint64_t skv, uint64_t d, hl_attn_spans *out, hl_error *err);
/* The layout's push words in both attention blocks (row strides: spec constants qkv_rs, o_rs). */
typedef struct hl_attn_rows {
    uint32_t nh, q_off, k_off, v_off;
} hl_attn_rows;
hl_attn_rows hl_attn_layout_rows(const hl_attn_layout *l);
/* The backward kernels a coop variant runs: whether they fold the rows'
 * statistics into their products (HELIOS_DISABLE_ATTENTION_BWD_FOLD), and whether the dQ
 * kernel hands dS to dS K in registers with a compact scratch (a variant with a dQ key tile
 * of its own, dq_bc; `dq_regs_why` says why the device cannot, NULL when it can), and the
 * two kernels' shared-memory bytes. The one place the check, the default and the pipelines
 * learn it from. */
typedef struct hl_attn_bwd_kernels {
    int fold, dq_regs;
    const char *dq_regs_why;
    uint32_t dq_shared_bytes, dkdv_shared_bytes;
} hl_attn_bwd_kernels;
hl_status hl_attn_bwd_kernels_of(const hl_device *dev, const hl_attn_variant *v, uint32_t d, hl_attn_bwd_kernels *k,
                                 hl_error *err);
/* Every valid coop variant for that direction (the count; up to cap written). */
size_t hl_attn_candidates(const hl_device *dev, uint32_t d, hl_dtype in, int backward, hl_attn_variant *out,
                          size_t cap);

#endif
