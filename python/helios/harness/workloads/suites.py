"""`helios suite`'s plug-ins: each workload (mlp.py, train/, decode/) declares one
Suite; cli/suite.py is the one driver and runs every suite the same way:

1. the suite's fields from the flags given; `small`'s values first with --tiny or on a
   CPU Vulkan device (the GPU-sized defaults would take hours there), said on stderr;
2. a flag only other suites read, given: refused; --adapters checked against the
   suite's choices (the default where not given);
3. `configure`: its config (a SuiteConfig) from the fields and its own flags, checked
   before any work (ValueError names the flag), and the files the run will write;
4. `run`, the markdown table, the JSON (where `writes_result` says: rank 0 under a
   launcher), the verdict (`rejected`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Optional


@dataclass
class SuiteConfig:
    """The fields every suite's config starts with; each suite's adds its own."""

    adapters: list[str] = field(default_factory=list)
    seed: int = 0
    command: list[str] = field(default_factory=list)  # the command line, as run


class AdapterChoice(NamedTuple):
    """What --adapters may name for a run: choices (None: the suite checks the names in
    `configure`), the default, and the run as messages name it."""

    choices: Optional[tuple[str, ...]]
    default: tuple[str, ...]
    label: str


def _every_result(result: dict) -> bool:
    return True


def _no_outputs(cfg: Any) -> list[tuple[str, str]]:
    return []


@dataclass(frozen=True)
class Suite:
    """One workload of `helios suite`, as the driver (cli/suite.py) runs it."""

    name: str
    doc: str  # what it is (its module's docstring; --help prints the first paragraph)
    fields: Mapping[str, str]  # config field -> the flag (argparse dest) that sets it
    small: Mapping[str, Any]  # those fields' values with --tiny or on a CPU device
    flags: tuple[str, ...]  # the other flags (dests) only this suite reads
    adapters: Callable[[Any], AdapterChoice]  # from the parsed flags
    # (parsed flags, the fields with adapters, seed and command) -> its config; ValueError
    # naming the flag for a run that cannot be done
    configure: Callable[[Any, dict], SuiteConfig]
    run: Callable[[Any, Callable[[str], None]], dict]  # (config, log) -> the result
    markdown: Callable[[dict], str]
    row: type  # its rows' type (the results folder's rows module)
    rejected: str  # the verdict's line when the run is rejected
    outputs: Callable[[Any], list[tuple[str, str]]] = _no_outputs  # config -> [(path, flag)] it writes
    writes_result: Callable[[dict], bool] = _every_result  # whether this process writes the result
    takes_device: bool = False  # --device picks its Vulkan device (else: its GPU is torch's CUDA device)

    @property
    def own_flags(self) -> frozenset[str]:
        return frozenset(self.fields.values()) | frozenset(self.flags)
