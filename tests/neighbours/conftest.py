"""The projects under this folder are run by tests/test_neighbours.py through their own command line, each from
a copy with its own rootdir and ini; pytest-gpucheck's own run never collects them."""

from __future__ import annotations

collect_ignore_glob = ["*"]
