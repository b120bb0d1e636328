"""Model of smg v1.9.0's e2e_test/conftest.py (SOURCE.md): the suite's own directory on sys.path, and its hooks
and fixtures re-exported from the ``fixtures`` package, where the ``gpu(count)`` marker is registered."""

from __future__ import annotations

import sys
from pathlib import Path

_E2E_TEST = Path(__file__).resolve().parent  # e2e_test/

# Add e2e_test to path so "from infra import ..." works
if str(_E2E_TEST) not in sys.path:
    sys.path.insert(0, str(_E2E_TEST))

from fixtures import (  # noqa: E402
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_setup,
    setup_backend,
)

# Re-export for pytest discovery
__all__ = [
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_runtest_setup",
    "setup_backend",
]
