"""The expected-performance table (gpucheck/data/gpu_performance.json) and its loader, gpucheck.performance.expected.

Quick: no TensorFlow, no GPU. The names below are device names as NVML / nvidia-smi / TensorFlow report them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpucheck import knowledge
from gpucheck.performance import expected
from gpucheck.performance.expected import Expected, expected_for, pcie_gbps

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "tests" / "scenarios"


def rows() -> list[dict[str, Any]]:
    models: list[dict[str, Any]] = knowledge.data(expected.DATA_FILE)["models"]
    return models


def row_id(row: dict[str, Any]) -> str:
    return str(row["model"])


#: Real device name -> the table's ``model``.
NAMES: list[tuple[str, str]] = [
    ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"),
    ("NVIDIA H100 PCIe", "H100 PCIe 80GB"),
    ("NVIDIA H100 NVL", "H100 NVL 94GB"),
    ("NVIDIA H200", "H200 SXM 141GB"),
    ("NVIDIA H200 NVL", "H200 NVL 141GB"),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA L4", "L4"),
    ("Tesla T4", "T4"),
    ("NVIDIA T4", "T4"),
    ("Tesla V100-SXM2-16GB", "V100 SXM2"),
    ("Tesla V100-SXM2-32GB", "V100 SXM2"),
    ("Tesla V100-PCIE-16GB", "V100 PCIe"),
    ("Tesla V100-PCIE-32GB", "V100 PCIe"),
    ("Tesla V100S-PCIE-32GB", "V100S PCIe 32GB"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA A10", "A10"),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
    ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090"),
    # Spelling that varies between tools and driver versions.
    ("  nvidia h100 80gb hbm3 ", "H100 SXM5 80GB"),
    ("NVIDIA Tesla V100-SXM2-16GB", "V100 SXM2"),
    ("H100 80GB HBM3", "H100 SXM5 80GB"),
]

#: Names that belong to no model in the table (and must not fall into a near one).
UNKNOWN = [
    "NVIDIA GeForce GT 710",
    "Quadro K2200",
    "NVIDIA L40",
    "NVIDIA A100",
    "NVIDIA GeForce RTX 4090 D",
    "NVIDIA GeForce RTX 3090 Ti",
    "NVIDIA A10-4Q",
    "NVIDIA RTX A6000",
    "Tesla M60",
    "",
    "NVIDIA ",
]


def test_the_data_file_has_a_source_and_models() -> None:
    data = knowledge.data(expected.DATA_FILE)
    assert isinstance(data["_source"], str) and len(data["_source"]) > 200
    assert len(rows()) >= 17


@pytest.mark.parametrize("row", rows(), ids=row_id)
def test_every_model_is_well_formed(row: dict[str, Any]) -> None:
    assert set(row) <= {
        "model",
        "names",
        "compute_capability",
        "tflops",
        "memory_gbps",
        "pcie",
        "nvlink_gbps",
        "sources",
        "note",
    }
    assert row["names"], "a model no name can reach"
    for pattern in row["names"]:
        re.compile(pattern, re.IGNORECASE)
    assert re.fullmatch(r"\d+\.\d+", row["compute_capability"])
    assert row["tflops"] and set(row["tflops"]) <= set(expected.DTYPES)
    assert "float32" in row["tflops"]
    for figure in row["tflops"].values():
        assert isinstance(figure, (int, float)) and figure > 0
    assert isinstance(row["memory_gbps"], (int, float)) and row["memory_gbps"] > 0
    assert row["pcie"]["generation"] in {1, 2, 3, 4, 5, 6}
    assert row["pcie"]["width"] in {1, 2, 4, 8, 16}
    assert row["nvlink_gbps"] is None or row["nvlink_gbps"] > 0
    assert row["sources"]
    for source in row["sources"]:
        assert re.fullmatch(r"https://[A-Za-z0-9.-]+\.[a-z]{2,}/\S*", source), source
    assert "note" not in row or isinstance(row["note"], str)


@pytest.mark.parametrize("row", rows(), ids=row_id)
def test_tensor_figures_are_at_least_the_plain_fp32_one(row: dict[str, Any]) -> None:
    tflops = row["tflops"]
    for dtype in ("tf32", "float16", "bfloat16"):
        if dtype in tflops:
            assert tflops[dtype] >= tflops["float32"]
    if "tf32" in tflops and "float16" in tflops:
        # Tensor FP16 runs at twice TF32 on Ampere and later; 2% for the datasheets' rounding (L40S: 183 vs 362.05).
        assert tflops["float16"] == pytest.approx(2 * tflops["tf32"], rel=0.02)


def test_no_two_models_share_a_model_string() -> None:
    models = [row["model"] for row in rows()]
    assert len(models) == len(set(models))


def test_gpus_without_tf32_or_bf16_tensor_cores_leave_them_out() -> None:
    for name in ("Tesla T4", "Tesla V100-SXM2-16GB", "Tesla V100-PCIE-32GB"):
        found = expected_for(name)
        assert found is not None
        assert set(found.tflops) == {"float32", "float16"}


@pytest.mark.parametrize(("name", "model"), NAMES)
def test_a_real_name_finds_its_model(name: str, model: str) -> None:
    found = expected_for(name)
    assert found is not None, name
    assert found.model == model


@pytest.mark.parametrize("name", [*UNKNOWN, None])
def test_an_unknown_name_finds_nothing(name: str | None) -> None:
    assert expected_for(name) is None


def test_each_name_matches_one_model_only() -> None:
    """First match wins, but a listed name that two models' patterns take would be an ordering accident."""
    for name, _model in NAMES:
        wanted = knowledge.model_name(name)
        takers = [
            row["model"]
            for row in rows()
            if any(re.fullmatch(pattern, wanted, re.IGNORECASE) for pattern in row["names"])
        ]
        assert len(takers) == 1, (name, takers)


def test_the_healthy_h100_scenario_is_an_h100_sxm() -> None:
    scenario = json.loads((SCENARIOS / "cuda" / "h100-80gb-healthy.json").read_text(encoding="utf-8"))
    names = {gpu["name"] for gpu in scenario["gpus"]}
    assert names == {"NVIDIA H100 80GB HBM3"}
    for name in names:
        found = expected_for(name)
        assert found is not None
        assert found.model == "H100 SXM5 80GB"
        assert found.compute_capability == "9.0"
        assert found.memory_gbps == 3350
        assert found.nvlink_gbps == 900
        assert (found.pcie_generation, found.pcie_width) == (5, 16)
        assert found.tflops == {"float32": 66.9, "tf32": 494.7, "float16": 989.4, "bfloat16": 989.4}


def scenario_gpu_names() -> set[str]:
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "gpus" and isinstance(value, list):
                    names.update(gpu["name"] for gpu in value if isinstance(gpu, dict) and gpu.get("name"))
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in SCENARIOS.rglob("*.json"):
        walk(json.loads(path.read_text(encoding="utf-8")))
    return names


def test_scenario_names_of_listed_models_match() -> None:
    names = scenario_gpu_names()
    assert "NVIDIA H100 80GB HBM3" in names
    by_name = dict(NAMES)
    for name in names:
        if name in by_name:
            found = expected_for(name)
            assert found is not None and found.model == by_name[name], name


def test_the_loader_gives_every_model_in_file_order() -> None:
    loaded = expected.models()
    assert [entry.model for entry in loaded] == [row["model"] for row in rows()]
    for entry in loaded:
        assert isinstance(entry, Expected)
        assert entry.sources and all(source.startswith("https://") for source in entry.sources)
        assert entry.memory_gbps is not None and entry.pcie_generation is not None


def test_a_caller_cannot_change_the_table() -> None:
    first = expected_for("NVIDIA L4")
    assert first is not None
    first.tflops["float32"] = 0.0
    again = expected_for("NVIDIA L4")
    assert again is not None and again.tflops["float32"] == 30.3


@pytest.mark.parametrize(
    ("generation", "width", "gbps"),
    [
        (1, 16, 4.0),
        (2, 16, 8.0),
        (3, 16, 15.75),
        (4, 16, 31.5),
        (5, 16, 63.0),
        (6, 16, 121.0),
        (4, 8, 15.75),
        (3, 1, 0.985),
    ],
)
def test_pcie_bandwidth(generation: int, width: int, gbps: float) -> None:
    assert pcie_gbps(generation, width) == pytest.approx(gbps, rel=0.002)


@pytest.mark.parametrize(("generation", "width"), [(None, 16), (4, None), (None, None), (7, 16), (0, 16), (4, 0)])
def test_pcie_bandwidth_unknown(generation: int | None, width: int | None) -> None:
    assert pcie_gbps(generation, width) is None
