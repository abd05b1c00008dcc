"""Measurements made of other measurements: `helios ci` (a base and a head
built and benched), `helios bisect`, and the fleet summary of a multi-GPU
bench."""
