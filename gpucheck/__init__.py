"""gpucheck: does TensorFlow get NVIDIA GPU acceleration here, how well, and if not, why not."""

__version__ = "0.1.0"
