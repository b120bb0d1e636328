"""Model of smg v1.9.0's e2e_test/router/test_pd_mmlu.py (SOURCE.md): its ``gpu(2)`` classes and their marks as
released; the bodies, which run MMLU through prefill/decode workers on two GPUs, are not modelled
(``setup_backend`` skips, or smg's ``skip_for_runtime`` hook first)."""

from __future__ import annotations

import pytest


@pytest.mark.engine("sglang")
@pytest.mark.gpu(2)
@pytest.mark.model("meta-llama/Llama-3.1-8B-Instruct")
@pytest.mark.e2e
@pytest.mark.skip_for_runtime("vllm", reason="vLLM does not support HTTP mode")
@pytest.mark.parametrize("setup_backend", ["pd_http"], indirect=True)
class TestPDMMLUHttp:
    """MMLU evaluation tests using PD disaggregation (HTTP mode)."""

    def test_pd_mmlu_basic(self, setup_backend):
        assert setup_backend


@pytest.mark.engine("sglang", "vllm")
@pytest.mark.gpu(2)
@pytest.mark.model("meta-llama/Llama-3.1-8B-Instruct")
@pytest.mark.e2e
@pytest.mark.parametrize("setup_backend", ["pd_grpc"], indirect=True)
class TestPDMMLUGrpc:
    """MMLU evaluation tests using PD disaggregation (gRPC mode)."""

    def test_pd_mmlu_basic(self, setup_backend):
        assert setup_backend
