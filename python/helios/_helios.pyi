"""Type stub of the C extension (csrc/python): the engine's Python face."""

from types import ModuleType
from typing import Any, Mapping, Optional, Sequence, final

import numpy as np

# helios._helios.testing: what tests drive (async_host, host_signal, host_wait, kernels, resident_grid)
testing: ModuleType

MAX_LAUNCHES: int
GEMV_MAX_ROWS: int
LAYERNORM_ROWS: int
PERSIST_MEMBERS: int  # a persistent run's members at most
TRACE_HEADER: int
TRACE_MEMBERS: int
TRACE_GRID: int
TRACE_STAMP: int
TRACE_N: int
TRACE_K: int
TRACE_ATTENTION: int
ATTENTION_MAX_HEAD_DIM: int
MAX_OPERAND_ELEMENTS: int
BUILD_COMMIT: str
KERNELS_DIGEST: str
PLAN_OPS: dict[
    str, tuple[tuple[str, str, bool], ...]
]  # each plan op's (key, type, optional) arguments (shaders/ops.py)

class HeliosError(RuntimeError): ...
class DeviceMemoryError(HeliosError, MemoryError): ...
class UnsupportedError(HeliosError, NotImplementedError): ...
class DeviceLostError(HeliosError): ...
class NoDeviceError(HeliosError): ...
class DeviceClosedError(HeliosError): ...

def device_count() -> int: ...
def abandoned_devices() -> int: ...
def canonical_variant(variant: str, /) -> str: ...
def variant_fields(variant: str, /) -> dict[str, Any]: ...
def format_variant(fields: dict[str, Any], /) -> str: ...
def attention_variant_fields(variant: str, /) -> dict[str, Any]: ...
def _fault_count(kind: str, /) -> int: ...
def cuda_pool_lookup(ptr: int, nbytes: int) -> Optional[tuple[int, int, int, int]]: ...
def env_flag(name: str, /) -> bool: ...
def cuda_pool_usage() -> tuple[int, int]: ...
def _cuda_pool_alloc(size: int, device: int) -> int: ...
def _cuda_pool_free(ptr: int, /) -> None: ...
@final
class Plan:
    @property
    def counts(self) -> Optional[tuple[int, int, int, int]]: ...
    @property
    def run_shape(self) -> Optional[tuple[int, int, int]]: ...
    @property
    def alive(self) -> bool: ...
    def replay(self) -> tuple[float, float, float]: ...
    def write_params(self, first: int, words: Sequence[int], /) -> None: ...
    def read_params(self, first: int, n: int, /) -> list[int]: ...
    def trace_words(self) -> Optional[bytes]: ...
    def close(self) -> None: ...

@final
class Capture:
    @property
    def counts(self) -> Optional[tuple[int, int, int]]: ...
    @property
    def alive(self) -> bool: ...
    def replay(self) -> tuple[float, float, float]: ...
    def submit(self, wait: int, signal: int, /) -> None: ...
    def gpu_ms(self) -> float: ...
    def close(self) -> None: ...

class Device:
    def __new__(
        cls, index: Optional[int] = None, *, disable_coop: bool = False, disable_coop2: bool = False
    ) -> Any: ...
    @property
    def info(self) -> Mapping[str, Any]: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: Any) -> None: ...
    def variants(self) -> list[str]: ...
    def _async_values(self) -> tuple[int, int]: ...
    def _cuda_signal(self, stream: int, value: int) -> None: ...
    def _cuda_wait(self, stream: int, value: int) -> None: ...
    def default_variant(
        self, m: int = 0, n: int = 0, k: int = 0, batch: int = 1, dtype: str = "float16", trans_b: bool = False
    ) -> str: ...
    def active_override(self) -> Optional[str]: ...
    def check_variant(self, variant: str, dtype: str = "float16") -> str: ...
    def kernel_stats(
        self,
        variant: Optional[str] = None,
        out_dtype: Optional[str] = None,
        in_dtype: str = "float16",
        machine_code: bool = False,
    ) -> dict[str, Any]: ...
    def telemetry(self) -> dict[str, Any]: ...
    def reset_telemetry(self) -> None: ...
    def empty_cache(self) -> None: ...
    # One operation's keys (gemm.c's OP_KEYS), then the timing and ordering keys.
    def _gemm(
        self,
        *,
        a: Any,
        b: Any,
        m: int,
        n: int,
        k: int,
        out_dtype: str = ...,
        variant: Optional[str] = None,
        batch: int = 1,
        trans_a: bool = False,
        trans_b: bool = False,
        lda: int = ...,
        ldb: int = ...,
        stride_a: int = ...,
        stride_b: int = ...,
        bias: Any = None,
        act: int = 0,
        alpha: float = 1.0,
        beta: float = 0.0,
        c_in: Any = None,
        out: Any = None,
        in_dtype: str = ...,
        wait_value: int = 0,
        signal_value: int = 0,
        warmup: int = 0,
        iters: int = 0,
        flush_bytes: int = 0,
    ) -> tuple[np.ndarray, list[float], float, str]: ...
    def _chain(self, ops: Sequence[dict[str, Any]], warmup: int = 0, iters: int = 0) -> tuple[list[float], float]: ...
    def _plan(self, ops: Sequence[dict[str, Any]], params: int = 0) -> Plan: ...
    def _attention(
        self,
        q: Any,
        k: Any,
        v: Any,
        bh: int,
        sq: int,
        skv: int,
        d: int,
        *,
        causal: bool = False,
        scale: float = ...,
        variant: Optional[str] = None,
        warmup: int = 0,
        iters: int = 0,
        flush_bytes: int = 0,
        out: Any = None,
        wait_value: int = 0,
        signal_value: int = 0,
        dtype: str = "float16",
        lse: Any = None,
        layout: Optional[tuple[int, int, int, int, int, int]] = None,
    ) -> tuple[np.ndarray, list[float], float, str]: ...
    def _group_begin(self, wait: int, signal: int) -> None: ...
    def _group_end(self) -> None: ...
    def _capture_begin(self) -> None: ...
    def _capture_end(self) -> Capture: ...
    def _capture_abort(self) -> None: ...
    def _train(
        self,
        kind: int,
        dst: Any,
        *,
        ids: Any = None,
        src: Any = None,
        src2: Any = None,
        aux: Any = None,
        rows: int = 0,
        n: int = 0,
        seq: int = 0,
        table_rows: int = 0,
        ld: int = 0,
        off: int = 0,
        accumulate: bool = False,
        scale: float = 1.0,
        dtype: Any = "float16",
        dst_off: int = 0,
        flags: int = 0,
        wait_value: int = 0,
        signal_value: int = 0,
    ) -> None: ...
    def _adamw(
        self,
        p: Any,
        m: Any,
        v: Any,
        g: Any,
        words: Any,
        n: int,
        step_slot: int,
        lr_slot: int,
        beta1: float,
        beta2: float,
        eps: float,
        weight_decay: float,
        copy: Any = None,
        dtype: Any = "bfloat16",
        *,
        clip_slot: int = 0,
        max_norm: float = 0.0,
        guard: bool = False,
        wait_value: int = 0,
        signal_value: int = 0,
    ) -> None: ...
    def _layernorm(
        self,
        x: Any,
        gamma: Any,
        beta: Any,
        h: Any,
        stats: Any,
        rows: int,
        d: int,
        eps: float,
        dtype: str,
        r: Any = None,
        x_out: Any = None,
        rms: bool = False,
        *,
        wait_value: int = 0,
        signal_value: int = 0,
    ) -> None: ...
    def _layernorm_backward(
        self,
        grad_h: Any,
        x: Any,
        stats: Any,
        gamma: Any,
        gx: Any,
        gx16: Any,
        partial: Any,
        rows: int,
        d: int,
        dtype: str,
        grad_res: Any = None,
        *,
        wait_value: int = 0,
        signal_value: int = 0,
    ) -> None: ...
    def _semaphore_value(self) -> int: ...
    def _profile_start(self, capacity: int = 4096) -> None: ...
    def _profile_stop(self) -> tuple[list[tuple[str, float]], int]: ...
    def _copy_strided(
        self,
        src: Any,
        dst: Any,
        sizes: tuple[int, int, int, int],
        src_strides: tuple[int, int, int],
        dst_strides: tuple[int, int, int],
        src_offset: int = 0,
        dst_offset: int = 0,
        *,
        wait_value: int = 0,
        signal_value: int = 0,
    ) -> None: ...
    def _activation(
        self,
        z: Any,
        y: Any,
        n: int,
        act: int,
        dtype: str,
        grad: Any = None,
        *,
        wait_value: int = 0,
        signal_value: int = 0,
    ) -> None: ...
    def _attention_backward(
        self,
        q: Any,
        k: Any,
        v: Any,
        o: Any,
        do: Any,
        lse: Any,
        dq: Any,
        dk: Any,
        dv: Any,
        bh: int,
        sq: int,
        skv: int,
        d: int,
        *,
        causal: bool = False,
        scale: float = ...,
        variant: Optional[str] = None,
        warmup: int = 0,
        iters: int = 0,
        flush_bytes: int = 0,
        wait_value: int = 0,
        signal_value: int = 0,
        dtype: str = "float16",
        passes: int = 0,
        layout: Optional[tuple[int, int, int, int, int, int]] = None,
    ) -> tuple[None, list[float], float, str]: ...
    def _attention_kernel_stats(
        self,
        d: int,
        variant: Optional[str] = None,
        causal: bool = False,
        dtype: str = "float16",
        backward: bool = False,
        machine_code: bool = False,
    ) -> dict[str, Any]: ...
    def _attention_variants(
        self,
        d: int,
        variant: Optional[str] = None,
        skv: int = 0,
        causal: bool = False,
        dtype: str = "float16",
        backward: bool = False,
    ) -> tuple[str, list[str]]: ...

class Tensor:
    def __init__(self, device: Device, nbytes: int, exportable: bool = False, cuda_segment: int = 0) -> None: ...
    @property
    def exportable(self) -> bool: ...
    @property
    def exports(self) -> int: ...
    def _dlpack(self, shape: tuple, code: int, bits: int, versioned: bool = False, /) -> Any: ...
    def _cuda_device(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def device(self) -> Device: ...
    @property
    def alive(self) -> bool: ...
    def _write(self, offset: int, data: Any) -> None: ...
    def _read(self, offset: int, out: Any) -> None: ...
    def _view(self) -> Any: ...
    def _slice(self, offset: int, nbytes: int) -> Any: ...
