"""PyTorch's rules: the compatibility layer (its CUDA build judged by ``gpucheck.rules.compat``, and torch's own word
on the driver) and the framework layer (importable, a CUDA build, GPUs seen)."""
