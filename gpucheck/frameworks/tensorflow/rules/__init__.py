"""TensorFlow's rules: the framework, the CUDA libraries its build needs, placement and numerics, memory."""
