"""How a measurement is taken: the round loop (correctness gate, warm-up,
interleaved rounds), statistics, GPU state and clocks, energy windows, progress,
the shape sets, and the provenance every result file starts with. The floor of
the harness: it imports only the API layer."""
