/* hazard.c — the hazard set's operations (hazard.h). */
#include "hazard.h"

hl_hazard_set hl_hazard_set_over(hl_range *read, hl_range *written, uint32_t cap) {
    return (hl_hazard_set){.read = read, .written = written, .cap = cap};
}

static int overlaps(const hl_range *set, uint32_t n, const hl_range *r) {
    for (uint32_t i = 0; i < n; i++)
        if (set[i].buffer == r->buffer && set[i].lo < r->hi && r->lo < set[i].hi) return 1;
    return 0;
}

int hl_hazard_blocks(const hl_hazard_set *h, const hl_range *r, int writes) {
    if (r->lo == r->hi) return 0;
    return overlaps(h->written, h->n_written, r) || (writes && overlaps(h->read, h->n_read, r));
}

int hl_hazard_room(const hl_hazard_set *h, uint32_t more) {
    return h->n_read + more <= h->cap && h->n_written + more <= h->cap;
}

void hl_hazard_note(hl_hazard_set *h, const hl_range *r, int writes) {
    if (r->lo == r->hi) return;
    if (writes)
        h->written[h->n_written++] = *r;
    else
        h->read[h->n_read++] = *r;
}

void hl_hazard_clear(hl_hazard_set *h) { h->n_read = h->n_written = 0; }

hl_range hl_range_whole(VkBuffer buffer) { return (hl_range){buffer, 0, UINT64_MAX}; }
