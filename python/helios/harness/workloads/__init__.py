"""What is measured: the matmul and attention benches and their CUDA
references (cuBLAS, SDPA), the suites (mlp, decode), external adapters and
the fuzzers. Each fills rows of a result file through the protocol."""
