"""Stand-in for a TensorFlow wheel that aborts at import with LOG(FATAL) (see tests/shadow/README.md)."""

import os
import sys

sys.stderr.write(
    "2026-11-21 10:00:00.000000: F tensorflow/core/platform/cpu_feature_guard.cc:37] The TensorFlow library "
    "was compiled to use AVX instructions, but these aren't available on your machine.\n"
)
sys.stderr.flush()
os.abort()
