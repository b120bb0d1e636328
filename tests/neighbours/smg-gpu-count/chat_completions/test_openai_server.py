"""Model of smg v1.9.0's e2e_test/chat_completions/test_openai_server.py and test_function_calling.py
(SOURCE.md): their ``gpu(1)`` classes, a ``gpu(4)`` subclass of a ``gpu(1)`` class (smg resolves the marks
child-first, fixtures/markers.py) and a ``skip_for_runtime`` method, their marks as released; the bodies, which
need sglang/vLLM workers on the GPUs, are not modelled (``setup_backend`` skips)."""

from __future__ import annotations

import pytest


@pytest.mark.engine("sglang", "vllm", "trtllm", "tokenspeed")
@pytest.mark.gpu(1)
@pytest.mark.model("meta-llama/Llama-3.2-1B-Instruct")
@pytest.mark.gateway(extra_args=["--tool-call-parser", "llama", "--history-backend", "memory"])
@pytest.mark.parametrize("setup_backend", ["grpc"], indirect=True)
class TestOpenAIServerFunctionCalling:
    """Tests for OpenAI-compatible function calling with the llama tool parser."""

    def test_function_calling_format(self, setup_backend):
        assert setup_backend

    @pytest.mark.skip_for_runtime("vllm", reason="model: the runtime's own skip, before the fixture")
    def test_function_calling_streaming(self, setup_backend):
        assert setup_backend


@pytest.mark.engine("sglang", "vllm", "trtllm", "tokenspeed")
@pytest.mark.gpu(1)
@pytest.mark.model("openai/gpt-oss-20b")
@pytest.mark.gateway(extra_args=["--history-backend", "memory"])
@pytest.mark.parametrize("setup_backend", ["grpc", "http"], indirect=True)
class TestChatCompletionGptOss:
    def test_chat_completion(self, setup_backend):
        assert setup_backend


@pytest.mark.engine("sglang", "vllm", "trtllm", "tokenspeed")
@pytest.mark.gpu(4)
@pytest.mark.model("openai/gpt-oss-120b")
@pytest.mark.gateway(extra_args=["--history-backend", "memory"])
class TestChatCompletionGptOss120B(TestChatCompletionGptOss):
    """Tests for chat completions API with Harmony model (GPT-OSS 120B, 4 GPU)."""
