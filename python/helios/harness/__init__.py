"""The measuring instrument: the benchmark protocol and its workloads, the
references Helios is measured against, statistics, GPU state, result files
(schema, provenance, comparison, reports, fleets). Imports the API layer
(helios.*) and never the command line; loaded only when used."""

from .protocol.shapes import parse_attention_shapes
from .results.attention_table import attention_markdown
from .workloads.attention import AttnBenchConfig, run_attention_bench
from .workloads.matmul import BenchConfig, run_bench
from .workloads.matmul import markdown as bench_markdown

__all__ = [
    "AttnBenchConfig",
    "BenchConfig",
    "attention_markdown",
    "bench_markdown",
    "parse_attention_shapes",
    "run_attention_bench",
    "run_bench",
]
