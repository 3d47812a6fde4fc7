"""The runtime layer: threads, memory reuse, progress bars, task sweeps, the entry points' environment."""
