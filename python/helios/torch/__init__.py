"""``helios.torch``: Helios's products and attention on torch CUDA tensors,
inside ``torch.autograd``.

``matmul(a, b)``, ``linear(x, weight, bias=None, activation=None)`` and
``attention(q, k, v, causal=False, scale=None)`` take float16 or bfloat16 CUDA
tensors (all inputs of one op the same type) on the GPU Helios runs on (the Vulkan device with that CUDA device's UUID) and
return torch CUDA tensors. ``mlp``, ``self_attention`` and ``decoder`` are whole
blocks (a transformer MLP; QKV product, heads, attention and projection; a
pre-LayerNorm decoder stack with its final LayerNorm and head) whose ops, with
the activations, LayerNorms and residual adds between them, go to
Helios as one group per direction.

Groups: each op, or block, is one group of Helios submissions ordered with torch's
stream, and every group costs one pair of switches of the GPU between the CUDA and
the Vulkan context (about 0.3 ms on the H100),
while ops inside a group cost only their kernels. Calling the block ops instead of
chains of ``linear`` and torch ops between is what makes a model fast here
(``helios suite train``: per op, per block, whole decoder). Inside a group the ops
are recorded into command buffers that reach the GPU in chunks as they are
recorded (eight ops, or fewer where the GPU has run out of work). Gradients: matmul and linear backward run as Helios
products (the transposed layouts; both gradients of one product submitted
together); attention backward runs Helios's backward
kernels (FlashAttention-2's recomputation from the forward's log-sum-exp, which
the forward keeps for it).

How data moves: an input allocated inside ``memory_pool()`` (torch memory made
with CUDA's virtual-memory API, which Vulkan can import) is read in place, with
no copy, and so is a result of an earlier Helios op handed to the next one whole
(an activation, a gradient: the same memory, also reshaped); any other input is
copied device to device, on torch's current stream,
into an exportable Helios tensor kept per shape (weights too, every call: a
tensor modified through ``.data`` keeps its version counter, so a cached copy
could go stale: allocate weights in the pool instead). Helios runs the op into
an exportable tensor that torch receives with no copy (DLPack), taken from a
pool of results torch has freed. There is never a host round trip.
``to_helios(t, copy=None)`` (also ``helios.from_dlpack`` for CUDA tensors) gives
the Helios Tensor itself. Ordering: where the device shares a timeline
semaphore with CUDA (``VK_KHR_external_semaphore_fd``), torch's stream signals it
after the copies, Helios's submission waits for that and signals when done, and
the stream waits for Helios before anything reads the result: the call returns
without any host wait. Elsewhere the stream is synchronized before Helios runs
(one host wait per op). ``ordering()`` says which applies.

bfloat16 runs on Helios's bf16 cooperative-matrix kernels where the device has
them (``Device.info["bf16_coop_enabled"]``), else on its scalar fp32 kernels:
always bfloat16 in and out with fp32 accumulation, never through float16.

DistributedDataParallel: register ``ddp_comm_hook`` on the wrapped model. DDP's own
hook starts each bucket's all-reduce on NCCL's stream as soon as the bucket fills,
unordered against Helios's queued work (which waits for torch's stream only); the
GPU then time-slices the CUDA and Vulkan contexts, and Helios's backward took over
twice its time (2 H100s: 46.6 against 19.8 ms). The hook has torch's stream wait for
each all-reduce, so Helios's next group starts after it.

Inside: ``_state`` (the one ``Runtime`` with everything kept across calls, the
device of a tensor, the ordering with torch's stream), ``_staging`` (where
operands and results live), ``_group`` (ops recorded as one ordered group),
``_blocks`` and ``_functions`` (the blocks' ops and their autograd functions),
``_library`` (the single ops as torch custom operators),
``_params``, ``_casts`` and ``_decoder`` (the decoder stack), ``_ops`` (the
public functions and their operand checks), ``_training`` (``training_plan``: a whole
training step as one Helios capture, one crossing each way a step).

``torch.compile``: ``matmul``, ``linear`` and ``attention`` are torch custom
operators (``torch.ops.helios.*``, ``_library``): ``torch.compile(model,
fullgraph=True)`` traces through them and ``torch.export`` carries them. The
blocks (``mlp``, ``self_attention``, ``decoder``) are excluded from tracing
(``torch.compiler.disable``): a compiled model runs them eagerly between its
compiled graphs.
"""

from __future__ import annotations

from ._ops import attention, ddp_comm_hook, decoder, linear, matmul, mlp, self_attention
from ._params import LAYER_PARAMS
from ._staging import memory_pool, to_helios
from ._state import MAX_POOLED, device_for, ordering
from ._training import TrainingPlan, training_plan

__all__ = [
    "LAYER_PARAMS",
    "MAX_POOLED",
    "attention",
    "ddp_comm_hook",
    "decoder",
    "device_for",
    "linear",
    "matmul",
    "memory_pool",
    "mlp",
    "ordering",
    "self_attention",
    "to_helios",
    "TrainingPlan",
    "training_plan",
]
