/* async.h — submissions that do not wait and the open group of ordered operations
 * (struct hl_device's `async` and `group`), owned by csrc/core/runtime/ (async.c,
 * exec.c). */
#ifndef HELIOS_ASYNC_H
#define HELIOS_ASYNC_H

#include <stdint.h>

#include <vulkan/vulkan.h>
#include "buffer.h"
#include "hazard.h"

#define HL_RING_SLOTS 16     /* async submissions in flight at most (the oldest is waited for) */
#define HL_GROUP_MAX_OPS 256 /* operations one ring slot records (its descriptor sets) */
#define HL_RETIRED_MAX 8     /* scratch buffers replaced inside open groups, awaiting their work */
/* A group is submitted in chunks as it is recorded, so that the GPU starts on the
 * first ops while the host records the rest: every HL_GROUP_CHUNK_OPS ops (sooner
 * where the GPU has run out of work: exec.c, record_in_group), each
 * chunk waiting for the one before through a value between the group's pair
 * (hl_async_values leaves HL_VALUE_SPAN - 1 values between wait and signal). */
#define HL_GROUP_CHUNK_OPS 8
#define HL_VALUE_SPAN 64
/* Ranges an ordered op's group touched since its last barrier (ordered.c); past this, a barrier. */
#define HL_HAZARD_RANGES 48

/* A ring slot: a command buffer and its descriptor sets, reused once its work is done. */
struct hl_ring_slot {
    VkCommandBuffer cmd;
    VkDescriptorPool pool;
    uint64_t done; /* the value its last submission signals */
    int timed;     /* its two timestamps (queries 2i, 2i+1) are written and not yet read */
};

/* A scratch buffer a grown reservation replaced while a group that may use it was open
 * (buffer.c): destroyed once the timeline reaches `done`. */
struct hl_retired {
    hl_buffer buf;
    uint64_t done;
};

/* Submissions that do not wait (async.c): ordered with CUDA through one timeline
 * semaphore shared with it; each takes a slot of a ring of command buffers. */
typedef struct hl_async {
    VkSemaphore timeline;
    int host_driven;  /* the timeline is this device's alone, driven by the host */
    uint64_t next;    /* the next value to hand out */
    uint64_t pending; /* the last value an async submission signals: sync work waits for it */
    struct hl_ring_slot ring[HL_RING_SLOTS];
    VkQueryPool queries; /* a timestamp pair per ring slot (where the queue has timestamps) */
    uint32_t ring_next;
    struct hl_retired retired[HL_RETIRED_MAX];
    uint32_t n_retired;
} hl_async;

/* An open group (exec.c, hl_async_group_begin): the ordered operations recorded into a
 * ring slot's command buffer, submitted in chunks (HL_GROUP_CHUNK_OPS) and the rest by
 * hl_async_group_end; the chunk being recorded waits for `wait`. */
typedef struct hl_group {
    int open;
    struct hl_ring_slot *slot; /* the chunk's slot (NULL only after a failed chunk start) */
    uint64_t wait, signal;
    uint32_t chunk_ops;
    int idle_flush; /* a chunk goes as soon as the GPU is idle (HELIOS_DISABLE_IDLE_FLUSH=1: only when full) */
    /* What the chunk's operations since its last barrier read and wrote (hazard.h), so
     * that independent operations overlap: a set over hazard_ranges. */
    hl_hazard_set hazards;
    hl_range hazard_ranges[2][HL_HAZARD_RANGES];
} hl_group;

#endif
