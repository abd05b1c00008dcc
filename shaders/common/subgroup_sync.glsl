// subgroup_sync.glsl — sub_sync(): every invocation of the subgroup reaches it, and its
// shared-memory writes before it are seen by the subgroup's reads after it. One control
// barrier carrying shared-memory semantics: on the H100 it costs what the bare control
// barrier does, and ~1% less attention time than a fence followed by a barrier
// (results/h100-attn-sync-0d361b1). Needs GL_KHR_memory_scope_semantics.
void sub_sync() {
    controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease);
}
