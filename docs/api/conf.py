"""Sphinx configuration of the API reference (make docs; CI builds it with
warnings as errors, so a docstring that does not render fails the build)."""

project = "Helios"
extensions = ["sphinx.ext.autodoc"]
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
html_theme = "alabaster"
exclude_patterns = ["_build"]
nitpicky = False
