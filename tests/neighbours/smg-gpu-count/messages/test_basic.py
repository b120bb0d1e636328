"""Model of smg v1.9.0's e2e_test/messages/test_basic.py (SOURCE.md): its class and its marks as released; the
bodies, which call the Anthropic Messages API through the gateway, check what the model's fixture gives."""

from __future__ import annotations

import pytest


@pytest.mark.vendor("anthropic")
@pytest.mark.gpu(0)
@pytest.mark.parametrize("setup_backend", ["anthropic"], indirect=True)
class TestMessagesBasic:
    """Basic message creation tests against the Anthropic Messages API."""

    def test_non_streaming_basic(self, setup_backend):
        backend, model, _, _ = setup_backend
        assert (backend, model) == ("anthropic", "claude-sonnet-4-6")

    def test_streaming_basic(self, setup_backend):
        backend, _, _, _ = setup_backend
        assert backend == "anthropic"
