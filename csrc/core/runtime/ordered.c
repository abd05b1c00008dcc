/* ordered.c — how an ordered operation is recorded into a command buffer that runs later
 * (a group's chunk, a capture): its descriptor set written, then its dispatches behind a
 * barrier only where it depends on what the operations since the last barrier touched
 * (byte ranges of the buffers each binds, read or written). exec.c records a group's
 * operations through here, capture.c a capture's. */
#include <string.h>

#include "internal.h"

hl_binding hl_operand_binding(const hl_operand *o) {
    return o->tensor ? (hl_binding){o->tensor->buf.buffer, o->tensor->offset + o->at}
                     : (hl_binding){o->scratch ? o->scratch->buffer : VK_NULL_HANDLE, 0};
}

/* The memory an operand binds, empty (bytes 0) when it binds none. */
static hl_range range_of(const hl_operand *o) {
    const hl_binding b = hl_operand_binding(o);
    return (hl_range){b.buffer, b.offset, b.buffer ? b.offset + o->bytes : b.offset};
}

/* Whether x must wait for the operations recorded since the chunk's last barrier:
 * it reads what they wrote, writes what they read or wrote, or the tracker is full. */
static int hazard(const hl_device *dev, const hl_exec *x) {
    if (!x->n_operands || !hl_hazard_room(&dev->group.hazards, x->n_operands)) return 1; /* unknown, or full */
    for (uint32_t i = 0; i < x->n_operands; i++) {
        const hl_range r = range_of(&x->operands[i]);
        if (hl_hazard_blocks(&dev->group.hazards, &r, x->operands[i].access != HL_ACCESS_READ)) return 1;
    }
    return 0;
}

static void track(hl_device *dev, const hl_exec *x) {
    for (uint32_t i = 0; i < x->n_operands; i++) {
        const hl_range r = range_of(&x->operands[i]);
        hl_hazard_note(&dev->group.hazards, &r, x->operands[i].access != HL_ACCESS_READ);
    }
}

/* Records one ordered operation into the slot's command buffer (begun): its
 * descriptor set from the slot's pool, its dispatches after what it depends on.
 * A lone ordered op (and every op with HELIOS_DISABLE_GROUP_OVERLAP=1) sits
 * between two barriers; inside a group an op goes behind a barrier only where it
 * touches memory an op since the last barrier wrote (or writes memory one read),
 * so independent ops (a weight gradient and its input gradient, the layout copies
 * of three heads) overlap on the GPU; a chunk's semaphore orders it after the
 * chunk before. Outputs are not poisoned here: an ordered op is the production
 * path (a training step's outputs are gigabytes of fills), and every kernel is
 * checked against poisoned outputs in synchronous calls; HELIOS_POISON_ORDERED=1
 * poisons them too (what a test that must see an unwritten or early-read output
 * sets). */
hl_status hl_exec_record(hl_device *dev, VkCommandBuffer cmd, VkDescriptorSet ds, int grouped, hl_exec *x,
                         hl_error *err) {
    hl_status st = HL_OK;
    int poison = 0, no_overlap = 0;
    HL_TRY(hl_env_flag("HELIOS_POISON_ORDERED", &poison, err));
    HL_TRY(hl_env_flag("HELIOS_DISABLE_GROUP_OVERLAP", &no_overlap, err));
    const int overlap = grouped && !poison && !no_overlap && !dev->profile.on;
    const double t_ds = hl_now_ms();
    if (ds) {
        hl_binding bufs[HL_BINDINGS] = {{0}};
        for (uint32_t i = 0; i < x->n_operands; i++)
            if (x->operands[i].slot >= 0 && (uint32_t)x->operands[i].slot < HL_BINDINGS)
                bufs[x->operands[i].slot] = hl_operand_binding(&x->operands[i]);
        hl_write_set(dev, ds, bufs, x->n_slots);
    }
    const double t_rec = hl_now_ms();
    dev->tel.async_descriptor_ms += t_rec - t_ds;
    VkCommandBuffer sync_cmd = dev->cmd; /* the helpers record into dev->cmd: the given one for now */
    dev->cmd = cmd;
    if (!overlap && (dev->group.hazards.n_read || dev->group.hazards.n_written)) {
        hl_compute_barrier(dev); /* ops recorded without one before this op's fills */
        hl_hazard_clear(&dev->group.hazards);
    }
    for (uint32_t i = 0; poison && i < x->n_operands; i++) {
        const hl_operand *o = &x->operands[i];
        if (!o->poison) continue;
        const hl_binding b = hl_operand_binding(o);
        vkCmdFillBuffer(dev->cmd, b.buffer, b.offset, hl_align_up(o->bytes, 4), 0xffffffffu);
    }
    if (!overlap || hazard(dev, x)) {
        hl_cmd_barrier(dev, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        hl_hazard_clear(&dev->group.hazards);
    } else {
        dev->tel.overlapped++;
    }
    x->record(dev, x->ctx, ds);
    if (overlap) {
        track(dev, x);
    } else {
        hl_cmd_barrier(dev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                       VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
        hl_profile_mark(dev, dev->cmd, HL_PROFILE_OP);
    }
    dev->cmd = sync_cmd;
    dev->tel.record_ms += hl_now_ms() - t_rec;
    x->gpu_ms = 0.0;
fail:
    return st;
}
