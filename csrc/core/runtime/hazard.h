/* hazard.h — the one hazard model of recorded work: what the operations since the last
 * barrier read and wrote, as byte ranges of buffers. The next operation goes behind a
 * barrier only where it reads a range they wrote or writes one they read or wrote.
 * Groups and captures (ordered.c) track the ranges their operands bind; plans (plan.c)
 * track their tensors' whole buffers (hl_range_whole). */
#ifndef HELIOS_HAZARD_H
#define HELIOS_HAZARD_H

#include <stdint.h>
#include <vulkan/vulkan.h>

typedef struct hl_range {
    VkBuffer buffer;
    VkDeviceSize lo, hi; /* bytes [lo, hi) of the buffer */
} hl_range;

/* The ranges read and written since the last barrier, in its owner's storage of cap each. */
typedef struct hl_hazard_set {
    hl_range *read, *written;
    uint32_t n_read, n_written, cap;
} hl_hazard_set;

/* A set over the owner's two arrays of cap ranges, empty. */
hl_hazard_set hl_hazard_set_over(hl_range *read, hl_range *written, uint32_t cap);
/* Whether an access to r (a write where `writes`) must wait for what the set holds. */
int hl_hazard_blocks(const hl_hazard_set *h, const hl_range *r, int writes);
/* Whether `more` ranges of each kind still fit. */
int hl_hazard_room(const hl_hazard_set *h, uint32_t more);
/* r noted as read, or written where `writes` (an empty range notes nothing). */
void hl_hazard_note(hl_hazard_set *h, const hl_range *r, int writes);
/* After a barrier: nothing to wait for. */
void hl_hazard_clear(hl_hazard_set *h);
/* Every byte of a buffer: two ranges of one buffer always overlap (a plan orders by buffer). */
hl_range hl_range_whole(VkBuffer buffer);

#endif
