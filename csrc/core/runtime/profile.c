/* profile.c — per-operation GPU timestamps of ordered work (no Vulkan profiler
 * sees these dispatches): while a profile is on, every ordered operation sits
 * between barriers (no overlap, so each one's time is its own) and writes a
 * timestamp when it is done, and every submission one when it starts; stopping
 * reads them back in recording order. A measuring tool: it serialises what the
 * hazard tracker would overlap. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* HL_OK once no group is open and every ordered submission is done; else a refusal
 * naming `what` (the call) and `then` (what to do). */
static hl_status settled(hl_device *dev, const char *what, const char *then, hl_error *err) {
    hl_status st = HL_OK;
    if (dev->group.open) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: a group is open; %s", what, then);
    uint64_t reached = 0;
    if (dev->async.timeline && dev->async.pending)
        HL_VK(dev->semaphore_value(dev->device, dev->async.timeline, &reached));
    if (reached < dev->async.pending)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: ordered work is still pending (semaphore at %llu of %llu); %s", what,
                       (unsigned long long)reached, (unsigned long long)dev->async.pending, then);
fail:
    return st;
}

hl_status hl_profile_start(hl_device *dev, uint32_t capacity, hl_error *err) {
    hl_status st = HL_OK;
    if (dev->profile.on) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "a profile is already on for this device");
    if (capacity < 2 || capacity > HL_PROFILE_MAX)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "profile capacity must be 2..%u timestamps, got %u",
                       HL_PROFILE_MAX, capacity);
    if (!dev->timestamps_ok)
        return hl_fail(err, HL_ERR_UNSUPPORTED, "device '%s' has no usable timestamps on its compute queue",
                       dev->caps.name);
    /* The pool is reset once here, in a submission of its own: a reset recorded
     * beside each timestamp stalled the queue (~20 us an op on the H100). That
     * submission runs after the ordered work already submitted, so none may still
     * wait for a signal. */
    HL_TRY(settled(dev, "profile start", "start the profile before a group, once earlier work is done", err));
    if (dev->profile.pool && dev->profile.capacity < capacity) {
        vkDestroyQueryPool(dev->device, dev->profile.pool, NULL);
        dev->profile.pool = VK_NULL_HANDLE;
    }
    if (!dev->profile.pool) {
        VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                     .queryCount = capacity};
        HL_VK(vkCreateQueryPool(dev->device, &qci, NULL, &dev->profile.pool));
        dev->profile.capacity = capacity;
    }
    HL_TRY(hl_begin_commands(dev, 0, err));
    vkCmdResetQueryPool(dev->cmd, dev->profile.pool, 0, capacity);
    HL_VK(vkEndCommandBuffer(dev->cmd));
    HL_TRY(hl_submit_wait(dev, err));
    dev->profile.on = 1;
    dev->profile.limit = capacity;
    dev->profile.n = 0;
    dev->profile.dropped = 0;
fail:
    return st;
}

void hl_profile_mark(hl_device *dev, VkCommandBuffer cmd, hl_profile_kind kind) {
    hl_profile *p = &dev->profile;
    if (!p->on) return;
    if (p->n >= p->limit) {
        p->dropped++;
        return;
    }
    vkCmdWriteTimestamp(
        cmd, kind == HL_PROFILE_SUBMISSION ? VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT : VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
        p->pool, p->n);
    p->kinds[p->n++] = (uint8_t)kind;
}

hl_status hl_profile_stop(hl_device *dev, hl_profile_entry *out, uint32_t *n, uint32_t *dropped, hl_error *err) {
    hl_status st = HL_OK;
    hl_profile *p = &dev->profile;
    uint64_t *raw = NULL;
    *n = 0;
    *dropped = 0;
    if (!p->on) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "no profile is on for this device");
    /* Read only once everything submitted is done (a timestamp not yet written may
     * never be, and reading it is not defined): refused, the profile stays on. */
    HL_TRY(settled(dev, "profile stop", "end the group and wait for its work (torch.cuda.synchronize())", err));
    p->on = 0;
    if (!p->n) return HL_OK;
    raw = calloc(2u * p->n, sizeof *raw); /* (value, availability) per timestamp */
    if (!raw) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "profile: %u timestamps", p->n);
    VkResult vr = vkGetQueryPoolResults(dev->device, p->pool, 0, p->n, 2u * p->n * sizeof *raw, raw, 2 * sizeof *raw,
                                        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
    if (vr != VK_SUCCESS && vr != VK_NOT_READY) HL_VK(vr);
    for (uint32_t i = 0; i < p->n; i++)
        if (!raw[2 * i + 1]) {
            st = hl_fail(err, HL_ERR_VULKAN, "profile: timestamp %u of %u was not written (its submission failed?)", i,
                         p->n);
            goto fail;
        }
    for (uint32_t i = 0; i < p->n; i++)
        out[i] = (hl_profile_entry){.kind = (hl_profile_kind)p->kinds[i], .ms = hl_ticks_ms(dev, raw[0], raw[2 * i])};
    *n = p->n;
    *dropped = p->dropped;
fail:
    free(raw);
    return st;
}

void hl_profile_close(hl_device *dev) {
    if (dev->profile.pool) vkDestroyQueryPool(dev->device, dev->profile.pool, NULL);
    memset(&dev->profile, 0, sizeof dev->profile);
}
