/* plan_persist.c — a plan's consecutive one-row products and decode attentions as one
 * persistent dispatch (matmul_gemv_persist.comp). A decode step's layers (QKV with its
 * norm as head, attention, projection, the MLP's two) then run HL_PERSIST_MEMBERS ops
 * at a time in one grid of a few workgroups an SM, a grid barrier between them in
 * place of a pipeline barrier and a dispatch: each product's first weight words are in
 * flight while the grid waits. */
#include <stdlib.h>
#include <string.h>

#include "plan_ops.h"

#define PERSIST_A_MAX 8192u  /* matmul_gemv_ln_head.glsl's LN_A_WORDS x 4: a member's widest A */
#define PERSIST_THREADS 256u /* the kernel's workgroup (shaders/families.py: matmul_gemv_persist's THREADS_X) */
#define PERSIST_LN_MAX 2048u /* matmul_gemv_ln_head.glsl's LN_THREADS x 4 x LN_GROUPS in a run */

/* The flag bits that choose a path of the run's kernel (a SwiGLU as A, a norm head, RMS,
 * an attention, its rope). RUN_FLAGS holds those its members set and every other bit:
 * runs differ in pipeline only by the paths they take. */
#define PATH_FLAGS                                                                                                     \
    (HL_FLAG_A_SWIGLU | HL_FLAG_PERSIST_LN | HL_FLAG_LN_RMS | HL_FLAG_PERSIST_ATTN | HL_FLAG_PERSIST_ROPE |            \
     HL_FLAG_PERSIST_GLU)

static int has_head(const hl_plan_step *s) { return s->n_binds == HL_BIND_MATMUL_LN_COUNT; }

static int is_attention(const hl_plan_op *o) { return o->kind == HL_PLAN_ATTN_DECODE; }

/* Whether step s can be a member: a product of one row on the matrix-vector kernel (or
 * its norm head), B as N x K in whole words, no split-K, an epilogue of a bias and an
 * activation at most, A on 8 bytes where the member copies it; or, where `attention`
 * allows, a decode attention in one dispatch. */
static int can_be_member(const hl_plan_op *o, const hl_plan_step *s, int attention) {
    if (s->n_dispatch != 1) return 0;
    if (is_attention(o)) return attention;
    if (o->kind != HL_PLAN_MATMUL) return 0;
    const hl_product *pl = &s->product;
    const hl_matmul_args *m = &o->matmul;
    if (pl->v.path != HL_PATH_GEMV || pl->reduce_pipe || m->m != 1 || pl->batch > 1 || !m->trans_b || m->trans_a)
        return 0;
    if (!(pl->pc.matmul.flags & HL_FLAG_B_VEC) || m->k % 8 || m->k > PERSIST_A_MAX || (pl->epi & ~HL_EPI_BIAS))
        return 0;
    return has_head(s) ? m->k <= PERSIST_LN_MAX : m->t_a->offset % 8 == 0;
}

/* The element types a member reads and writes (an attention: its dtype both ways), and
 * an attention's head dimension (0: a product). */
static void member_types(const hl_plan_op *o, hl_dtype *in, hl_dtype *out, uint32_t *d) {
    *in = is_attention(o) ? o->attn.dtype : o->matmul.in_dtype;
    *out = is_attention(o) ? o->attn.dtype : o->matmul.out_dtype;
    *d = is_attention(o) ? o->attn.head_dim : 0;
}

/* Whether t is written by a step of first..last (members, and the norms they head). */
static int written_in(const hl_plan_step *steps, uint32_t first, uint32_t last, const hl_tensor *t) {
    for (uint32_t i = first; t && i <= last; i++)
        for (uint32_t w = 0; w < HL_STEP_WRITES; w++)
            if (hl_tensors_share(steps[i].writes[w], t)) return 1;
    return 0;
}

/* Whether step j can join the run of mem[0..n-1] (first..last): the same element types
 * (one kernel), one head dimension, and none of what it reads around the coherent path
 * written by the run (a product's B, before the barrier, its bias and its norm's
 * weights; an attention's caches). */
static int can_join(const hl_plan_op *ops, const hl_plan_step *steps, const uint32_t *mem, uint32_t n, uint32_t last,
                    uint32_t j) {
    hl_dtype in, out, in_j, out_j;
    uint32_t d, d_j;
    member_types(&ops[j], &in_j, &out_j, &d_j);
    for (uint32_t k = 0; k < n; k++) {
        member_types(&ops[mem[k]], &in, &out, &d);
        if (in != in_j || (!is_attention(&ops[mem[k]]) && !is_attention(&ops[j]) && out != out_j) ||
            (d && d_j && d != d_j))
            return 0;
    }
    const uint32_t first = mem[0];
    if (is_attention(&ops[j]))
        return !written_in(steps, first, last, ops[j].attn.k_cache) &&
               !written_in(steps, first, last, ops[j].attn.v_cache);
    const hl_matmul_args *b = &ops[j].matmul;
    const hl_tensor *plain[2] = {b->t_b, b->t_bias};
    for (int k = 0; k < 2; k++)
        if (written_in(steps, first, last, plain[k])) return 0;
    /* a head's gamma and beta: its step reads them as reads[2] and reads[3] (plan_steps.c) */
    return !has_head(&steps[j]) ||
           (!written_in(steps, first, last, steps[j].reads[2]) && !written_in(steps, first, last, steps[j].reads[3]));
}

/* Member k's table row: a product's shape and epilogue, an attention's cache and words
 * (its splits and fit as its own dispatch pushes them, decode.c). */
static hl_persist_row table_row(const hl_plan_op *o, const hl_plan_step *s, uint32_t counters) {
    if (is_attention(o)) {
        const hl_push_decode_attention *pc = &s->pc[0].decode.attention;
        return (hl_persist_row){.attention = {.heads = o->attn.heads,
                                              .rows = o->attn.max_len,
                                              .flags = HL_FLAG_PERSIST_ATTN | (pc->rope ? HL_FLAG_PERSIST_ROPE : 0u),
                                              .splits = pc->splits,
                                              .pos_slot = o->attn.pos_slot,
                                              .scale = o->attn.scale,
                                              .counters = counters,
                                              .fit = pc->fit,
                                              .kv_heads = o->attn.kv_heads}};
    }
    const hl_push_matmul *pc = &s->pc[0].matmul;
    return (hl_persist_row){.product = {.n = (uint32_t)o->matmul.n,
                                        .k = (uint32_t)o->matmul.k,
                                        .flags = pc->flags | (has_head(s) ? HL_FLAG_PERSIST_LN : 0u),
                                        .ldb = pc->ldb,
                                        .epi = s->product.epi,
                                        .act = (uint32_t)o->matmul.act,
                                        .ln_eps = has_head(s) ? pc->ln_eps : 0.0f}};
}

/* Whether member a (a product) writes the row [gate | up] that member b, next, reads as
 * its SwiGLU A (FLAG_A_SWIGLU), in b's type: a then writes silu(gate) up itself into the
 * SwiGLU op's own row (FLAG_PERSIST_GLU), which b copies as a plain A, once for the
 * grid rather than in every workgroup. The row joins a's writes (the barriers after the
 * run see it); 0 where a has no write slot free. */
static int glu_pair(const hl_plan_op *ops, hl_plan_step *steps, uint32_t a, uint32_t b) {
    if (is_attention(&ops[a]) || is_attention(&ops[b]) || !steps[b].a_swiglu) return 0;
    const hl_matmul_args *up = &ops[a].matmul, *down = &ops[b].matmul;
    if (steps[b].a_swiglu != up->t_c || up->n != 2 * down->k || up->out_dtype != down->in_dtype) return 0;
    for (uint32_t w = 0; w < HL_STEP_WRITES; w++)
        if (!steps[a].writes[w]) {
            steps[a].writes[w] = down->t_a;
            return 1;
        }
    return 0;
}

uint32_t hl_plan_resident_grid(uint32_t grid, uint32_t sm_count, uint32_t registers) {
    if (!registers || !sm_count) return grid;
    const uint32_t regs = (registers + 7u) / 8u * 8u; /* given out a warp at a time, in steps of 8 a thread */
    const uint64_t fit = 65536u / ((uint64_t)regs * PERSIST_THREADS) * sm_count;
    return fit < grid ? (uint32_t)fit : grid;
}

/* The registers a thread of the run's kernel takes where the driver reports them on an
 * NVIDIA GPU, else 0. */
static uint32_t run_registers(const hl_device *dev, const hl_pipeline *pipe) {
    if (dev->caps.vendor_id != 0x10DEu) return 0;
    for (uint32_t i = 0; i < pipe->stats.n; i++)
        if (strcmp(pipe->stats.items[i].name, "Register Count") == 0 && pipe->stats.items[i].value > 0)
            return (uint32_t)pipe->stats.items[i].value;
    return 0;
}

/* Run first..last (members mem[0..n-1]) as step first's dispatch on *grid workgroups
 * (0: none, the steps stay apart, where no workgroup of its kernel fits an SM). */
static hl_status make_run(hl_device *dev, const hl_plan_op *ops, hl_plan_step *steps, uint32_t first, uint32_t last,
                          const uint32_t *mem, uint32_t n, uint32_t *grid, uint32_t *registers, hl_error *err) {
    hl_status st = HL_OK;
    hl_plan_step *h = &steps[first];
    hl_dtype in, out, in_k, out_k;
    uint32_t d = 64, d_k, products = 0, counters = 1; /* counter 0: the grid's arrivals */
    member_types(&ops[mem[0]], &in, &out, &d_k);
    for (uint32_t k = 0; k < n; k++) { /* the kernel's output type: its products' */
        member_types(&ops[mem[k]], &in_k, &out_k, &d_k);
        if (d_k) d = d_k;
        if (!d_k && !products++) out = out_k;
    }
    hl_persist_row rows[HL_PERSIST_MEMBERS] = {0};
    uint32_t run_flags = 0;
    const hl_tensor *glu[HL_PERSIST_MEMBERS] = {0};
    for (uint32_t k = 0; k < n; k++) {
        rows[k] = table_row(&ops[mem[k]], &steps[mem[k]], counters);
        if (is_attention(&ops[mem[k]])) counters += ops[mem[k]].attn.heads; /* a word a head */
        if (k && dev->plan_policy.swiglu_in_run && glu_pair(ops, steps, mem[k - 1], mem[k])) {
            glu[k - 1] = ops[mem[k]].matmul.t_a; /* the SwiGLU op's row, which its fusion left unwritten */
            rows[k - 1].product.flags |= HL_FLAG_PERSIST_GLU;
            rows[k].product.flags &= ~(uint32_t)HL_FLAG_A_SWIGLU;
        }
    }
    for (uint32_t k = 0; k < n; k++)
        run_flags |= is_attention(&ops[mem[k]]) ? rows[k].attention.flags : rows[k].product.flags;
    hl_spec_env e = {.subgroup = dev->caps.subgroup_size, .d = d, .run_flags = run_flags | ~(uint32_t)PATH_FLAGS};
    uint32_t spec[HL_SPEC_MATMUL_GEMV_PERSIST_COUNT];
    hl_spec_matmul_gemv_persist(spec, &e);
    hl_pipeline *pipe;
    HL_TRY(hl_pipeline_get(dev, hl_shader_matmul_gemv_persist(out, in, dev->plan_policy.trace), spec,
                           HL_SPEC_MATMUL_GEMV_PERSIST_COUNT, e.subgroup, &pipe, err));
    *registers = run_registers(dev, pipe); /* the grid capped by what they let an SM hold (0: none fits) */
    if (!(*grid = hl_plan_resident_grid((uint32_t)dev->plan_policy.persist_grid, dev->caps.sm_count, *registers)))
        return HL_OK;
    if (!(h->run = calloc(1, sizeof *h->run))) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    memcpy(h->run->table, rows, sizeof h->run->table);
    for (uint32_t k = 0; k < n; k++) h->run->member[k] = mem[k];
    memcpy(h->run->glu, glu, sizeof glu);
    h->persist_members = n;
    h->persist_len = last - first + 1;
    h->pipe[0] = pipe->pipeline;
    h->grid[0][0] = *grid;
    h->grid[0][1] = h->grid[0][2] = 1;
    memset(&h->pc[0], 0, sizeof h->pc[0]);
    h->pc[0].persist = (hl_push_persist){.members = n, .fault_word = HL_PLAN_FAULT_WORD};
    h->work_slot = -1;
    h->counter_words = counters;
    h->counter_slot = HL_BIND_MATMUL_PERSIST_COUNTERS;
    h->params_slot = HL_BIND_MATMUL_PERSIST_PARAMS;
    for (uint32_t i = first; i <= last; i++) steps[i].grid_div = 0; /* the run's grid is its own */
    for (uint32_t i = first + 1; i <= last; i++) steps[i].n_dispatch = 0;
fail:
    return st;
}

hl_status hl_plan_persist_runs(hl_device *dev, const hl_plan_op *ops, hl_plan_step *steps, uint32_t n_ops,
                               int attention, hl_plan_runs *runs, hl_error *err) {
    hl_status st = HL_OK;
    memset(runs, 0, sizeof *runs);
    runs->grid = (uint32_t)dev->plan_policy.persist_grid;
    if (!dev->plan_policy.persist_grid) return HL_OK;
    for (uint32_t i = 0; i < n_ops; i++) {
        if (!can_be_member(&ops[i], &steps[i], attention)) continue;
        uint32_t mem[HL_PERSIST_MEMBERS] = {i}, n = 1, last = i;
        for (uint32_t j = i + 1; j < n_ops && n < HL_PERSIST_MEMBERS; j++) {
            if (!steps[j].n_dispatch) continue; /* fused into a member (a norm head, a SwiGLU, a rope): nothing */
            if (!can_be_member(&ops[j], &steps[j], attention) || !can_join(ops, steps, mem, n, last, j)) break;
            mem[n++] = j;
            last = j;
        }
        if (n < 2) continue;
        uint32_t grid = 0, registers = 0;
        HL_TRY(make_run(dev, ops, steps, i, last, mem, n, &grid, &registers, err));
        if (!grid) {
            i = last;
            continue;
        }
        if (grid < runs->grid) runs->grid = grid;
        if (registers > runs->registers) runs->registers = registers;
        runs->n++;
        runs->grid_barriers += n - 1;
        for (uint32_t k = 0; k < n; k++) {
            if (!is_attention(&ops[mem[k]])) continue;
            const hl_attn_decode_args *a = &ops[mem[k]].attn;
            if (!runs->attentions++ || a->heads > runs->heads) {
                runs->heads = a->heads;
                runs->head_dim = a->head_dim;
                runs->fit = steps[mem[k]].pc[0].decode.attention.fit;
                runs->pos_slot = a->pos_slot;
            }
        }
        i = last;
    }
fail:
    return st;
}

static uint32_t trace_stamps(const hl_plan_step *s) { return HL_TRACE_STAMP * s->persist_members * s->grid[0][0]; }

uint32_t hl_plan_persist_trace(hl_plan_step *steps, uint32_t n_ops, uint32_t base) {
    uint32_t at = base;
    for (uint32_t i = 0; i < n_ops; i++) {
        hl_plan_step *s = &steps[i];
        if (!s->persist_len) continue;
        s->pc[0].persist.trace_word = (s->counter_words + 63u) / 64u * 64u; /* off the lines its barrier polls */
        s->counter_words = s->pc[0].persist.trace_word + trace_stamps(s);
        s->trace_at = at;
        at += HL_TRACE_HEADER + trace_stamps(s);
    }
    return at - base;
}

void hl_plan_persist_trace_headers(const hl_plan_step *steps, uint32_t n_ops, uint32_t *mapped) {
    for (uint32_t i = 0; i < n_ops; i++) {
        const hl_plan_step *s = &steps[i];
        if (!s->persist_len) continue;
        memset(mapped + s->trace_at, 0, 4ull * (HL_TRACE_HEADER + trace_stamps(s)));
        mapped[s->trace_at + HL_TRACE_MEMBERS] = s->persist_members;
        mapped[s->trace_at + HL_TRACE_GRID] = s->grid[0][0];
    }
}

void hl_plan_persist_trace_copy(hl_device *dev, VkCommandBuffer cmd, const hl_plan_step *steps, uint32_t n_ops,
                                VkBuffer params) {
    hl_cmd_barrier_on(dev, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                      VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
    for (uint32_t i = 0; i < n_ops; i++) {
        const hl_plan_step *s = &steps[i];
        if (!s->persist_len) continue;
        const VkBufferCopy c = {.srcOffset = s->binds[s->counter_slot].offset + 4ull * s->pc[0].persist.trace_word,
                                .dstOffset = 4ull * (s->trace_at + HL_TRACE_HEADER),
                                .size = 4ull * trace_stamps(s)};
        vkCmdCopyBuffer(cmd, s->binds[s->counter_slot].buffer, params, 1, &c);
    }
    hl_cmd_barrier_on(dev, cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                      VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
}

hl_status hl_plan_persist_tables(const hl_plan_step *steps, uint32_t n_ops, uint64_t align, VkDeviceSize *offset,
                                 uint32_t **host, uint32_t *bytes, hl_error *err) {
    const uint64_t row = 4ull * HL_PERSIST_ROW;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n_ops; i++)
        if (steps[i].persist_len) {
            offset[i] = hl_align_up(total, align);
            total = offset[i] + row * steps[i].persist_members;
        }
    if (!total) return HL_OK;
    *host = calloc(1, total);
    if (!*host) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    *bytes = (uint32_t)total;
    for (uint32_t i = 0; i < n_ops; i++)
        if (steps[i].persist_len)
            memcpy((char *)*host + offset[i], steps[i].run->table, row * steps[i].persist_members);
    return HL_OK;
}

void hl_plan_persist_bind(hl_plan_step *steps, uint32_t head, hl_binding table, hl_binding workspace) {
    hl_plan_step *h = &steps[head];
    for (uint32_t k = 0; k < HL_PERSIST_MEMBERS; k++) {
        hl_binding *slots = &h->run->slots[k * HL_PERSIST_ROLES];
        for (uint32_t r = 0; r < HL_PERSIST_ROLES; r++) slots[r] = workspace;
        if (k >= h->persist_members) continue;
        const hl_plan_step *s = &steps[h->run->member[k]];
        if (s->n_binds == HL_BIND_DECODE_COUNT) { /* an attention: decode.c's slots, the partials in the workspace */
            slots[HL_PERSIST_A] = s->binds[HL_BIND_DECODE_SRC];
            slots[HL_PERSIST_B] = s->binds[HL_BIND_DECODE_KC];
            slots[HL_PERSIST_C] = s->binds[HL_BIND_DECODE_VC];
            slots[HL_PERSIST_BIAS] = s->binds[HL_BIND_DECODE_OUT];
            slots[HL_PERSIST_X] = workspace;
            slots[HL_PERSIST_R] = s->binds[HL_BIND_DECODE_TAB]; /* the rope's table, where it rotates */
            continue;
        }
        slots[HL_PERSIST_A] = s->binds[HL_BIND_MATMUL_A];
        if (k && h->run->glu[k - 1]) slots[HL_PERSIST_A] = hl_tensor_or_scratch(h->run->glu[k - 1], NULL);
        if (h->run->glu[k]) slots[HL_PERSIST_GLU] = hl_tensor_or_scratch(h->run->glu[k], NULL);
        slots[HL_PERSIST_B] = s->binds[HL_BIND_MATMUL_B];
        slots[HL_PERSIST_C] = s->binds[HL_BIND_MATMUL_C];
        slots[HL_PERSIST_BIAS] = s->binds[HL_BIND_MATMUL_BIAS];
        if (!has_head(s)) continue;
        for (uint32_t r = 0; r < 7; r++) slots[HL_PERSIST_X + r] = s->binds[HL_BIND_MATMUL_LN_X + r];
    }
    h->n_binds = HL_BIND_MATMUL_PERSIST_COUNT;
    h->binds[HL_BIND_MATMUL_PERSIST_TABLE] = table;
}

void hl_plan_persist_write(hl_device *dev, VkDescriptorSet ds, const hl_plan_step *s) {
    VkDescriptorBufferInfo dbi[HL_PERSIST_SLOTS];
    for (uint32_t i = 0; i < HL_PERSIST_SLOTS; i++)
        dbi[i] = (VkDescriptorBufferInfo){s->run->slots[i].buffer, s->run->slots[i].offset, VK_WHOLE_SIZE};
    VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                              .dstSet = ds,
                              .dstBinding = HL_BIND_PERSIST,
                              .descriptorCount = HL_PERSIST_SLOTS,
                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                              .pBufferInfo = dbi};
    vkUpdateDescriptorSets(dev->device, 1, &w, 0, NULL);
}
