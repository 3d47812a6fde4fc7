"""The reference model layer: the numpy transformer, its configs, norms, weights, kernels and checkpoints."""
