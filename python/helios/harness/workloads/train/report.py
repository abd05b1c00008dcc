"""The training result as a markdown table: helios.harness.results.suite_tables, beside the other suites'."""

from __future__ import annotations

from ...results.suite_tables import train_markdown

__all__ = ["train_markdown"]
