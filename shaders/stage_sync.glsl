// stage_sync.glsl — a plan's stages overlapped without a barrier between them (plan.c):
// a workgroup waits until every workgroup of the stage before has counted itself in
// on that stage's word of STAGES (zeroed by the plan before each replay), and counts
// itself in on its own stage's word once its writes are done. The next stage's
// workgroups start while the last ones of this stage drain, and their reads of what
// nothing in the plan writes (weights, a KV cache's earlier rows) go out before the
// wait. The plan overlaps stages only where the driver launches a dispatch's
// workgroups after every workgroup of the dispatches before it (a waiting workgroup
// never holds back the ones it waits for).
//
// The includer declares BINDING_STAGES and, in its push constant block p, the words
// 14..17: sync_wait (the word waited on, 0: none), sync_count (the arrivals it waits
// for), sync_signal (the word counted in on, 0: none), sync_flags. Word 0 of STAGES is
// the plan's fault word: a wait that gave up sets it, and the replay reports it.
// Everything the stage before wrote is read through coherent bindings (not L1).

layout(binding = BINDING_STAGES) volatile coherent buffer Stages { uint stages[]; };

const uint SYNC_EARLY = 1u;             // sync_flags: reads of what the plan never writes may precede the wait
const uint SYNC_SPIN_LIMIT = 1u << 20;  // polls before a wait gives up (about a second): the fault word says so

// Whether reads of what nothing in the plan writes may go out before stage_wait().
bool stage_early() { return p.sync_wait == 0u || (p.sync_flags & SYNC_EARLY) != 0u; }

// Every invocation, in uniform control flow.
void stage_wait() {
    if (p.sync_wait == 0u) return;
    if (gl_LocalInvocationIndex == 0u) {
        uint polls = 0u;
        while (stages[p.sync_wait] < p.sync_count) {
            if (++polls == SYNC_SPIN_LIMIT) {
                atomicMax(stages[0], p.sync_wait);
                break;
            }
        }
        memoryBarrierBuffer();
    }
    barrier();
}

// Every invocation, in uniform control flow, after the workgroup's last write.
void stage_signal() {
    if (p.sync_signal == 0u) return;
    memoryBarrierBuffer();  // this workgroup's outputs, before its arrival is counted
    barrier();
    if (gl_LocalInvocationIndex == 0u) atomicAdd(stages[p.sync_signal], 1u);
}
