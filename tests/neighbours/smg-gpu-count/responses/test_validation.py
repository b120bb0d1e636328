"""Model of smg v1.9.0's e2e_test/responses/test_validation.py (SOURCE.md): its class and its marks as released;
the bodies, which post invalid Responses input through the gateway, check what the model's fixture gives."""

from __future__ import annotations

import pytest


@pytest.mark.vendor("openai")
@pytest.mark.gpu(0)
@pytest.mark.parametrize("setup_backend", ["openai"], indirect=True)
class TestResponsesInputValidation:
    """Negative tests for unknown/invalid ``type`` strings on Responses input."""

    @pytest.mark.parametrize("bad_type", ["input_txt", "", "INPUT_TEXT"])
    def test_unknown_content_type_rejected(self, setup_backend, bad_type):
        backend, model, _, _ = setup_backend
        assert backend == "openai" and model == "gpt-5-nano"
        assert bad_type not in ("input_text", "input_image", "input_file")
