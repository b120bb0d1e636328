"""Model of smg v1.9.0's e2e_test/infra (SOURCE.md): the names the hooks and the fixture use, with the values
of its constants.py and model_specs.py."""

from __future__ import annotations

import os

# Default model
DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"

# Default runtime for gRPC tests
DEFAULT_RUNTIME = "sglang"

ENV_MODEL = "E2E_MODEL"
ENV_RUNTIME = "E2E_RUNTIME"
ENV_SKIP_BACKEND_SETUP = "SKIP_BACKEND_SETUP"

THIRD_PARTY_MODELS: dict[str, dict[str, str]] = {
    "openai": {
        "description": "OpenAI API",
        "model": "gpt-5-nano",
        "api_key_env": "OPENAI_API_KEY",
    },
    "xai": {
        "description": "xAI API",
        "model": "grok-4-fast",
        "api_key_env": "XAI_API_KEY",
    },
    "anthropic": {
        "description": "Anthropic API",
        "model": "claude-sonnet-4-6",
        "api_key_env": "ANTHROPIC_API_KEY",
        "client_type": "anthropic",
    },
}

_RUNTIME_CACHE = None


def get_runtime() -> str:
    """Get the current test runtime (sglang or vllm).

    Returns:
        Runtime name from E2E_RUNTIME environment variable, defaults to "sglang".
    """
    global _RUNTIME_CACHE
    if _RUNTIME_CACHE is None:
        _RUNTIME_CACHE = os.environ.get(ENV_RUNTIME, DEFAULT_RUNTIME)
    return _RUNTIME_CACHE
