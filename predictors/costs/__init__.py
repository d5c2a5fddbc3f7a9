"""What each op costs: kernel models (roofline, learned CPU models, GPU GEMM, embedding
and measured-roofline models), CPU overheads T1-T5, and collectives."""
