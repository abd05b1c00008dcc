"""Sphinx configuration of the Helios manual (make docs; CI builds it with warnings
as errors, so a page or docstring that does not render fails the build).

Pages are Markdown through MyST (Debian's python3-myst-parser); the API reference
is generated from the installed package's docstrings (reference/api.rst)."""

project = "Helios"
extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
myst_heading_anchors = 3
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
html_theme = "alabaster"
exclude_patterns = ["_build"]
nitpicky = False
