"""The founding studies, built on the model: RNG–GEMM overlap for dropout (`dropout`), MoE decode
under EPLB and METRO routing (`moe_decode`), and low-precision numerics (`numerics`)."""
