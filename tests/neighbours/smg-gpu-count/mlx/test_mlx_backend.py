"""Model of smg v1.9.0's e2e_test/mlx/test_mlx_backend.py (SOURCE.md): a ``gpu(0)`` class of a local engine
(its marks as released, its gateway mark left out); the bodies, which talk to an MLX worker, check the marks."""

from __future__ import annotations

import pytest


@pytest.mark.engine("mlx")
@pytest.mark.gpu(0)  # MLX uses unified memory, no discrete GPU
@pytest.mark.model("mlx-community/Qwen3-0.6B-4bit")
class TestMlxBackend:
    """End-to-end tests for the MLX gRPC backend."""

    def test_marks(self, request):
        assert request.node.get_closest_marker("gpu").args == (0,)
        assert request.node.get_closest_marker("model").args == ("mlx-community/Qwen3-0.6B-4bit",)
