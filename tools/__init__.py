"""Product and development tools (the dev root, wheels, the notebook and README runners).

A package only so tests can import the tools they test (``from tools import readme_walk``);
each tool is also a script run from a checkout.
"""
