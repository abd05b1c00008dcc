"""Every ``HELIOS_*`` environment switch and build option, declared once.

The C core and the Python layer read these; this table is the one place that says
what each does. ``tests/test_switches.py`` fails when a switch is read anywhere in
the product (C, Python, the build, the development tools) but not declared here,
and when the manual's switch reference (``docs/reference/switches.md``) differs
from :func:`markdown_table`. Regenerate that page with ``python3 -m helios.switches``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Switch", "SWITCHES", "by_name", "markdown_table"]


@dataclass(frozen=True)
class Switch:
    name: str
    group: str  # "variant", "kill switch", "runtime", "cache", "harness", "build", "development", "test"
    values: str  # what it takes
    doc: str  # what it does, in one or two sentences


SWITCHES: tuple[Switch, ...] = (
    # ---- the device and the variant --------------------------------------------------
    Switch(
        "HELIOS_DEVICE", "runtime", "index", "The Vulkan device Helios opens by default (`helios --device=i` sets it)."
    ),
    Switch(
        "HELIOS_VARIANT",
        "variant",
        "variant string",
        "Forces one matmul variant for every product; invalid for the device: UnsupportedError.",
    ),
    Switch("HELIOS_COOP_TILE", "variant", "MxNxK", "The cooperative-matrix fragment shape of the default variant."),
    Switch(
        "HELIOS_COOP_F16IN_SUBGROUP_TILES",
        "variant",
        "MxN",
        "Fragments per subgroup (the subgroup tiling) of the default variant.",
    ),
    Switch("HELIOS_COOP_DIRECT_LOAD", "variant", "0/1", "1: the default variant loads fragments from global memory."),
    Switch("HELIOS_COOP_F16_ACCUM", "variant", "0/1", "1: the default variant accumulates in fp16."),
    # ---- kill switches --------------------------------------------------------------
    Switch("HELIOS_DISABLE_COOP", "kill switch", "1", "No cooperative-matrix kernels: the scalar fallback only."),
    Switch("HELIOS_DISABLE_COOP2", "kill switch", "1", "No NV cooperative matrix 2 (the opt-in coop2 family)."),
    Switch(
        "HELIOS_DISABLE_GEMV",
        "kill switch",
        "1",
        "Products of M <= 8 rows on the tiled kernels, not the matrix-vector kernel (gemv variants refused).",
    ),
    Switch(
        "HELIOS_DISABLE_DECODE_ATTENTION_FUSION",
        "kill switch",
        "1",
        "A plan's decode attention as two dispatches (split, then combine), not one whose last split combines.",
    ),
    Switch(
        "HELIOS_DISABLE_DECODE_ATTENTION_GRID",
        "kill switch",
        "1",
        "A plan's decode attention dispatches a workgroup for every split of the whole cache, not only "
        "the splits up to the position (the grid the host writes before each replay).",
    ),
    Switch(
        "HELIOS_DISABLE_PLAN_SWIGLU_FUSION",
        "kill switch",
        "1",
        "A plan's SwiGLU of one row keeps its own dispatch and barrier, not computed by the matrix-vector "
        "product that reads its output as it reads its A.",
    ),
    Switch(
        "HELIOS_DISABLE_PLAN_SWIGLU_IN_RUN",
        "kill switch",
        "1",
        "In a persistent run, the down product computes silu(gate) up from [gate | up] in every workgroup, not "
        "the gate and up product writing the SwiGLU's row once (its columns in pairs) for the down product to "
        "copy as its A.",
    ),
    Switch(
        "HELIOS_DISABLE_PLAN_ROPE_FUSION",
        "kill switch",
        "1",
        "A plan's rope on a QKV row keeps its own dispatch and barrier, not applied by the decode attention "
        "that reads the row next (to q and the new key as it reads them).",
    ),
    Switch(
        "HELIOS_DISABLE_PLAN_NORM_FUSION",
        "kill switch",
        "1",
        "A plan's LayerNorm of one row keeps its own dispatch and barrier, not run as the head of the "
        "matrix-vector product that reads its output.",
    ),
    Switch(
        "HELIOS_DISABLE_PLAN_PERSISTENT",
        "kill switch",
        "1",
        "A plan's consecutive one-row products each keep their own dispatch and barrier, not run one after "
        "another in one persistent dispatch with a grid barrier between them.",
    ),
    Switch(
        "HELIOS_PLAN_PERSISTENT_GRID",
        "runtime",
        "workgroups",
        "The grid of a plan's persistent runs of products (default: two workgroups an SM where the device "
        "reports its SMs, else no runs; 0: none). Every workgroup must be resident at once: a grid larger than "
        "the device holds is refused when it opens (two an SM; on a CPU device, lavapipe, one a thread: "
        "LP_NUM_THREADS, else the cores, and the grid that pays there is the cores). Decode attentions size "
        "their key splits for this grid, runs or not.",
    ),
    Switch(
        "HELIOS_PLAN_TRACE",
        "runtime",
        "1",
        "A plan's persistent runs stamp each member with the device clock in every workgroup (before its wait, "
        "after it, after its work; `Plan.trace()`, `tools/probes/trace.py`); the Device refuses to open where "
        "the device lacks VK_KHR_shader_clock's device clock.",
    ),
    Switch(
        "HELIOS_DISABLE_BF16_COOP", "kill switch", "1", "bfloat16 on the scalar kernels, not on cooperative matrices."
    ),
    Switch("HELIOS_DISABLE_COOP_ATTENTION", "kill switch", "1", "The attention forward on the scalar kernel."),
    Switch(
        "HELIOS_DISABLE_COOP_ATTENTION_BACKWARD", "kill switch", "1", "The attention backward on the scalar kernel."
    ),
    Switch(
        "HELIOS_DISABLE_ATTENTION_FOLD",
        "kill switch",
        "1",
        "The forward's softmax through the fp32 scratch for every tile (no running max folded into the score product).",
    ),
    Switch(
        "HELIOS_DISABLE_ATTENTION_ROWS_IN_REGISTERS",
        "kill switch",
        "1",
        "The forward's softmax rows not kept in registers (the fold or scratch path instead).",
    ),
    Switch(
        "HELIOS_DISABLE_ATTENTION_P_IN_REGISTERS",
        "kill switch",
        "1",
        "The forward hands P to P V through shared memory, not as converted registers (NV coopmat2).",
    ),
    Switch(
        "HELIOS_DISABLE_ATTENTION_BWD_FOLD",
        "kill switch",
        "1",
        "The backward's scores and dP through an fp32 scratch (no lse/delta folded into the products).",
    ),
    Switch(
        "HELIOS_DISABLE_ATTENTION_BWD_DS_IN_REGISTERS",
        "kill switch",
        "1",
        "The backward's dQ kernel takes dS through shared memory, not as converted registers.",
    ),
    # ---- how work is recorded and ordered -------------------------------------------
    Switch(
        "HELIOS_DISABLE_GROUP_OVERLAP",
        "runtime",
        "1",
        "A barrier before and after every op of a group, so no two ops overlap on the GPU.",
    ),
    Switch("HELIOS_DISABLE_IDLE_FLUSH", "runtime", "1", "Ordered work is sent only in full chunks, never on idle."),
    Switch(
        "HELIOS_DISABLE_INTERRUPT",
        "runtime",
        "1",
        "A wait for the GPU does not wake for Ctrl-C or SIGTERM (read as a device opens; the signal is then handled "
        "once the GPU's work is done).",
    ),
    Switch(
        "HELIOS_POISON_ORDERED",
        "runtime",
        "1",
        "Ordered (torch-interop) outputs are poisoned with NaN before each op too, as checked runs are.",
    ),
    Switch(
        "HELIOS_QUEUE_PRIORITY",
        "runtime",
        "low/medium/high/realtime",
        "The Vulkan queue's global priority (VK_KHR_global_priority); default: the driver's.",
    ),
    Switch("HELIOS_QUEUE_FAMILY", "runtime", "index", "Runs Helios on queue family N instead of its own pick."),
    Switch(
        "HELIOS_WAIT_SPIN_US",
        "runtime",
        "microseconds 0..1000000",
        "How long a wait for the GPU polls before the thread sleeps (0: sleeps at once); default 10000 on a "
        "GPU, 0 on a CPU device (lavapipe), where the poll would take a core from the device. A sleeping "
        "thread wakes tens of microseconds late, a decode step's share of its time.",
    ),
    Switch(
        "HELIOS_DISABLE_SEMAPHORE_ORDERING",
        "runtime",
        "1",
        "helios.torch orders against torch's stream by waiting on the host, not with a shared semaphore.",
    ),
    Switch("HELIOS_DISABLE_CAST_CACHE", "runtime", "1", "helios.torch casts parameters afresh for every call."),
    Switch("HELIOS_DISABLE_STAGE_MEMO", "runtime", "1", "helios.torch looks up each tensor's staging every time."),
    # ---- libraries and caches -------------------------------------------------------
    Switch("HELIOS_VULKAN_LOADER", "runtime", "path", "The Vulkan loader library to open instead of libvulkan.so.1."),
    Switch(
        "HELIOS_CUDA_DRIVER",
        "runtime",
        "path",
        "The CUDA driver library to open for interop instead of libcuda.so.1.",
    ),
    Switch(
        "HELIOS_PIPELINE_CACHE",
        "cache",
        "directory or 0/off",
        "Where the persisted Vulkan pipeline cache lives (default $XDG_CACHE_HOME/helios/pipelines); 0/off disables.",
    ),
    Switch(
        "HELIOS_PIPELINE_IR",
        "cache",
        "directory",
        "Every pipeline compiled is also written there with the driver's internal representations, where offered.",
    ),
    Switch(
        "HELIOS_INPUT_CACHE",
        "cache",
        "directory",
        "Seeded benchmark inputs are kept here and read back by later processes instead of drawn again "
        "(`helios ci` and `helios bisect` set it in their work directory); unset: always drawn.",
    ),
    Switch("HELIOS_TUNE_CACHE", "cache", "path", "The tuner's cache file (default $XDG_CACHE_HOME/helios/tune.json)."),
    Switch("HELIOS_ROOF_CACHE", "cache", "path", "The roof cache file (default $XDG_CACHE_HOME/helios/roof.json)."),
    # ---- the harness ----------------------------------------------------------------
    Switch(
        "HELIOS_COMMIT",
        "harness",
        "commit",
        "The commit result files name as the working directory's checkout where the tree has no .git.",
    ),
    Switch("HELIOS_DEBUG", "harness", "1", "An internal error prints its traceback (as --debug does)."),
    # ---- the build ------------------------------------------------------------------
    Switch(
        "HELIOS_BUILD_COMMIT",
        "build",
        "commit",
        "The commit the engine was built from where the source tree has no .git (helios --version prints it).",
    ),
    Switch("HELIOS_CUBLAS", "build", "ON/OFF", "CMake option: build the optional cuBLASLt reference module."),
    Switch(
        "HELIOS_ASAN",
        "build",
        "ON/OFF, 1",
        "CMake option (and `make asan`): the extension under AddressSanitizer and UBSan.",
    ),
    # ---- the development box and tools ----------------------------------------------
    Switch(
        "HELIOS_DEV_ROOT",
        "development",
        "directory",
        "Where tools/dev keeps the Debian 13 root (default /var/cache/helios-dev/trixie).",
    ),
    Switch(
        "HELIOS_DEV_CACHE",
        "development",
        "directory",
        "Where tools/dev keeps Mesa's shader cache and Helios's pipeline cache for the root, outside it "
        "(default: `cache` beside the root), so a rebuilt root keeps them.",
    ),
    Switch("HELIOS_DEV_QUIET", "development", "1", "tools/dev says less on stderr."),
    Switch(
        "HELIOS_DEV_LOCK_WAIT",
        "development",
        "seconds",
        "How long tools/dev waits to rebuild the root's helios install while a command runs on it (every "
        "checkout shares the install; default 0: it stops at once, naming the build in use).",
    ),
    Switch(
        "HELIOS_DEV_SHARED",
        "development",
        "paths, colon-separated",
        "Set by tools/dev: the host folders the root shares (the checkout and /tmp); helios refuses an output "
        "path elsewhere, before any work (the host would not see it).",
    ),
    Switch("HELIOS_WHEEL_LINKS", "development", "directory", "Extra wheels the wheel build and check install from."),
    Switch("HELIOS_WHEEL_TOOLS", "development", "directory", "Where the wheel build keeps auditwheel and its tools."),
    Switch("HELIOS_NOTEBOOK_QUICK", "development", "1", "The notebook generator's small, fast variant."),
    Switch("HELIOS_RESULTS", "development", "directory", "The result files the notebook generator reads."),
    # ---- the test suite -------------------------------------------------------------
    Switch(
        "HELIOS_FAULT",
        "test",
        "KIND:N",
        "Fault injection for tests: the Nth call of that kind fails as the driver would (csrc/core/runtime/fault.c).",
    ),
    Switch(
        "HELIOS_TEST_UNBOUNDED_GRID",
        "test",
        "1",
        "HELIOS_PLAN_PERSISTENT_GRID is not checked against the workgroups the device holds at once, so "
        "that tests can run a grid too large and see its barrier give up and the replay raise.",
    ),
    Switch(
        "HELIOS_TEST_FULL",
        "test",
        "1",
        "The test suite runs every variant the device lists (as `make test-full` and `pytest --full` do), "
        "not one per structural class.",
    ),
)

_BY_NAME = {s.name: s for s in SWITCHES}


def by_name(name: str) -> Switch:
    """The declared switch ``name``; KeyError for one that is not declared."""
    return _BY_NAME[name]


def markdown_table() -> str:
    """The manual's switch reference, as a Markdown page."""
    lines = [
        "# Environment switches",
        "",
        "Every `HELIOS_*` switch, generated from `helios.switches` (`python3 -m helios.switches`);",
        "a test fails when a switch is read anywhere but not declared there.",
        "",
        "| switch | kind | values | what it does |",
        "|---|---|---|---|",
    ]
    for s in SWITCHES:
        lines.append(f"| `{s.name}` | {s.group} | {s.values} | {s.doc.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
