"""Table-driven tests of the compatibility knowledge (gpucheck/data/*.json) and its judgements.

``PUBLISHED`` is NVIDIA's Table 3 'CUDA Toolkit and Corresponding Driver Versions' (Linux x86_64
column) transcribed here on its own, from the CUDA Toolkit release notes
(https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html and the archived notes of each
release), so that the data file and the rules are checked against the published table row by row.

``NOT_FROM_THE_TABLE`` holds the rows of releases whose Table 3 row could not be read here (CUDA 13.4 no
longer bundles a driver, so its runfile names none either): each names its basis, the rules are checked
against those rows the same way, and a finding that quotes such a row says where it comes from.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gpucheck import knowledge
from gpucheck.facts import CudaCall, CudaDevice, CudaDriverFacts, LibraryLoad
from gpucheck.frameworks.tensorflow import view as tf_view
from gpucheck.frameworks.tensorflow.rules import compat as tf_compat
from gpucheck.rules import compat
from gpucheck.settings import Settings

#: (toolkit as NVIDIA names it, version, minimum Linux x86_64 driver). CUDA 10.0 to 13.x.
PUBLISHED: list[tuple[str, str, str]] = [
    # 13.2 and 13.3 from public copies of Table 3, confirmed by NVIDIA's runfile names; the later updates
    # (13.2 Update 2, 13.1 Update 2, 13.0 Update 3, 12.9 Update 2, 12.8 Update 2) from runfile names alone (see the
    # data file's _source). CUDA 13.4 and 13.5: NOT_FROM_THE_TABLE below.
    ("CUDA 13.3 Update 1", "13.3.1", "610.43.02"),
    ("CUDA 13.3 GA", "13.3.0", "610.43.02"),
    ("CUDA 13.2 Update 2", "13.2.2", "595.71.05"),
    ("CUDA 13.2 Update 1", "13.2.1", "595.58.03"),
    ("CUDA 13.2 GA", "13.2.0", "595.45.04"),
    ("CUDA 13.1 Update 2", "13.1.2", "590.48.01"),
    ("CUDA 13.1 Update 1", "13.1.1", "590.48.01"),
    ("CUDA 13.1 GA", "13.1.0", "590.44.01"),
    ("CUDA 13.0 Update 3", "13.0.3", "580.126.20"),
    ("CUDA 13.0 Update 2", "13.0.2", "580.95.05"),
    ("CUDA 13.0 Update 1", "13.0.1", "580.82.07"),
    ("CUDA 13.0 GA", "13.0.0", "580.65.06"),
    ("CUDA 12.9 Update 2", "12.9.2", "575.57.08"),
    ("CUDA 12.9 Update 1", "12.9.1", "575.57.08"),
    ("CUDA 12.9 GA", "12.9.0", "575.51.03"),
    ("CUDA 12.8 Update 2", "12.8.2", "570.211.01"),
    ("CUDA 12.8 Update 1", "12.8.1", "570.124.06"),
    ("CUDA 12.8 GA", "12.8.0", "570.26"),
    ("CUDA 12.6 Update 3", "12.6.3", "560.35.05"),
    ("CUDA 12.6 Update 2", "12.6.2", "560.35.03"),
    ("CUDA 12.6 Update 1", "12.6.1", "560.35.03"),
    ("CUDA 12.6 GA", "12.6.0", "560.28.03"),
    ("CUDA 12.5 Update 1", "12.5.1", "555.42.06"),
    ("CUDA 12.5 GA", "12.5.0", "555.42.02"),
    ("CUDA 12.4 Update 1", "12.4.1", "550.54.15"),
    ("CUDA 12.4 GA", "12.4.0", "550.54.14"),
    ("CUDA 12.3 Update 1", "12.3.1", "545.23.08"),
    ("CUDA 12.3 GA", "12.3.0", "545.23.06"),
    ("CUDA 12.2 Update 2", "12.2.2", "535.104.05"),
    ("CUDA 12.2 Update 1", "12.2.1", "535.86.09"),
    ("CUDA 12.2 GA", "12.2.0", "535.54.03"),
    ("CUDA 12.1 Update 1", "12.1.1", "530.30.02"),
    ("CUDA 12.1 GA", "12.1.0", "530.30.02"),
    ("CUDA 12.0 Update 1", "12.0.1", "525.85.12"),
    ("CUDA 12.0 GA", "12.0.0", "525.60.13"),
    ("CUDA 11.8 GA", "11.8.0", "520.61.05"),
    ("CUDA 11.7 Update 1", "11.7.1", "515.48.07"),
    ("CUDA 11.7 GA", "11.7.0", "515.43.04"),
    ("CUDA 11.6 Update 2", "11.6.2", "510.47.03"),
    ("CUDA 11.6 Update 1", "11.6.1", "510.47.03"),
    ("CUDA 11.6 GA", "11.6.0", "510.39.01"),
    ("CUDA 11.5 Update 2", "11.5.2", "495.29.05"),
    ("CUDA 11.5 Update 1", "11.5.1", "495.29.05"),
    ("CUDA 11.5 GA", "11.5.0", "495.29.05"),
    ("CUDA 11.4 Update 4", "11.4.4", "470.82.01"),
    ("CUDA 11.4 Update 3", "11.4.3", "470.82.01"),
    ("CUDA 11.4 Update 2", "11.4.2", "470.57.02"),
    ("CUDA 11.4 Update 1", "11.4.1", "470.57.02"),
    ("CUDA 11.4.0 GA", "11.4.0", "470.42.01"),
    ("CUDA 11.3.1 Update 1", "11.3.1", "465.19.01"),
    ("CUDA 11.3.0 GA", "11.3.0", "465.19.01"),
    ("CUDA 11.2.2 Update 2", "11.2.2", "460.32.03"),
    ("CUDA 11.2.1 Update 1", "11.2.1", "460.32.03"),
    ("CUDA 11.2.0 GA", "11.2.0", "460.27.03"),
    ("CUDA 11.1.1 Update 1", "11.1.1", "455.32"),
    ("CUDA 11.1 GA", "11.1.0", "455.23"),
    ("CUDA 11.0.3 Update 1", "11.0.3", "450.51.06"),
    ("CUDA 11.0.2 GA", "11.0.2", "450.51.05"),
    ("CUDA 11.0.1 RC", "11.0.1", "450.36.06"),
    ("CUDA 10.2.89", "10.2.89", "440.33"),
    ("CUDA 10.1 (10.1.105 general release, and updates)", "10.1.105", "418.39"),
    ("CUDA 10.0.130", "10.0.130", "410.48"),
]
_COMPAT_13_4 = (
    "NVIDIA's compatibility package cuda-compat-13-4 615.71.09, released with CUDA 13.4 GA; NVIDIA's table row not read here"
)
#: (toolkit, version, driver, basis): NVIDIA's versioned CUDA compatibility packages carry the Table 3 driver
#: on every release where both are known (cuda-compat 12.4.1 = 550.54.15, 12.9.1 = 575.57.08, 13.0.2 = 580.95.05,
#: 13.1.1 = 590.48.01); the 13.5 GA row is the driver whose manifest first ships a compatibility package for 13.5.
NOT_FROM_THE_TABLE: list[tuple[str, str, str, str]] = [
    (
        "CUDA 13.5 GA", "13.5", "620.70.06",
        "NVIDIA's driver manifest redistrib_620.70.06.json, whose compatibility package is for CUDA 13.5; "
        "NVIDIA's table row not read here",
    ),
    ("CUDA 13.4 Update 1", "13.4.2", "615.71.09", _COMPAT_13_4),
    ("CUDA 13.4 GA", "13.4.1", "615.71.09", _COMPAT_13_4),
]
ROWS = [row[:3] for row in NOT_FROM_THE_TABLE] + PUBLISHED
#: Table 2, 'Minimum Required Driver Version for CUDA Minor Version Compatibility' (Linux).
MINOR_VERSION_FLOOR = {13: "580", 12: "525.60.13", 11: "450.80.02"}


def just_below(driver: str) -> str:
    parts = driver.split(".")
    last = int(parts[-1])
    if last > 0:
        parts[-1] = f"{last - 1:0{len(parts[-1])}d}"
    else:
        parts = [*parts[:-2], str(int(parts[-2]) - 1), "99"]
    return ".".join(parts)


def test_data_file_is_the_published_table() -> None:
    rows = [(r.toolkit, ".".join(map(str, r.version)), r.linux_driver_text) for r in knowledge.toolkit_rows()]
    assert rows == ROWS
    bases = {r.toolkit: r.basis for r in knowledge.toolkit_rows()}
    assert {t: b for t, b in bases.items() if b != knowledge.TABLE} == {t: b for t, _, _, b in NOT_FROM_THE_TABLE}
    assert knowledge.data("cuda_compat.json")["_source"].startswith("NVIDIA CUDA Toolkit Release Notes")


@pytest.mark.parametrize(("toolkit", "version", "driver"), ROWS, ids=[p[0] for p in ROWS])
def test_rules_agree_with_published_row(toolkit: str, version: str, driver: str) -> None:
    """Row by row: the listed driver runs the release; a driver just below it does not run it natively,
    and runs it under minor version compatibility exactly when Table 2 says so."""
    major = int(version.split(".")[0])
    assert knowledge.required_driver(version) == driver
    at = knowledge.judge_driver(version, driver)
    assert at.status == "ok", (toolkit, at)
    assert knowledge.cuda_of_driver(driver) >= tuple(int(p) for p in version.split(".")[:2])  # type: ignore[operator]
    below = just_below(driver)
    judged = knowledge.judge_driver(version, below)
    served = knowledge.cuda_of_driver(below)
    floor = MINOR_VERSION_FLOOR.get(major)
    mvc = (
        floor is not None
        and served is not None
        and served[0] == major
        and knowledge.parse_version(below) >= knowledge.parse_version(floor)  # type: ignore[operator]
    )
    assert judged.status == ("minor-version-compatibility" if mvc else "too-old"), (toolkit, below, judged)
    # The driver's own word (cuDriverGetVersion) agrees with the table when no driver version is known.
    encoded = served[0] * 1000 + served[1] * 10 if served else None
    by_cuda = knowledge.judge_driver(version, None, encoded)
    if served is None:
        assert by_cuda.status == "unknown"  # older than every CUDA release in the table
    elif served >= tuple(int(p) for p in version.split(".")[:2]):
        assert by_cuda.status == "ok"
    elif served[0] == major and major in MINOR_VERSION_FLOOR:
        assert by_cuda.status == "minor-version-compatibility"
    else:
        assert by_cuda.status == "too-old"  # another major, or CUDA 10.x (no minor version compatibility)


@pytest.mark.parametrize(
    ("build", "driver", "cuda_int", "status"),
    [
        ("12.5.1", "555.42.06", 12050, "ok"),
        ("12.5.1", "550.54.15", 12040, "minor-version-compatibility"),
        ("12.5.1", "535.104.05", 12020, "minor-version-compatibility"),
        ("12.5.1", "525.60.13", 12000, "minor-version-compatibility"),
        ("12.5.1", "520.61.05", 11080, "too-old"),
        ("12.5.1", "470.82.01", 11040, "too-old"),
        ("12.5.1", "580.65.06", 13000, "ok"),
        ("12.5.1", None, 12090, "ok"),
        ("12.5.1", None, 12020, "minor-version-compatibility"),
        ("12.5.1", None, 11080, "too-old"),
        ("11.8", "450.80.02", 11000, "minor-version-compatibility"),
        ("11.8", "450.51.06", 11000, "too-old"),
        ("10.1", "410.48", 10000, "too-old"),
        ("13.0", "575.57.08", 12090, "too-old"),
        ("13.0", None, None, "unknown"),
        # R615 serves CUDA 13.4 natively; R610 runs it under minor version compatibility; R575 is CUDA 12.
        ("13.4", "615.71.09", None, "ok"),
        ("13.4.1", "610.43.02", None, "minor-version-compatibility"),
        ("13.4", None, 13040, "ok"),
        ("13.4", "575.57.08", None, "too-old"),
        ("13.5", "615.71.09", None, "minor-version-compatibility"),
    ],
)
def test_judge_driver(build: str, driver: str | None, cuda_int: int | None, status: str) -> None:
    assert knowledge.judge_driver(build, driver, cuda_int).status == status


@pytest.mark.parametrize(
    ("build", "driver", "needs"),
    [
        ("12.5.1", "470.82.01", "555.42.06 (NVIDIA's CUDA toolkit/driver table)"),
        ("13.4", "575.57.08", f"615.71.09 ({_COMPAT_13_4})"),
        ("13.9", "575.57.08", None),  # newer than the table: the remedy asks for the CUDA version instead
    ],
)
def test_driver_too_old_says_where_the_required_driver_comes_from(build: str, driver: str, needs: str | None) -> None:
    judgement = knowledge.judge_driver(build, driver)
    assert judgement.status == "too-old"
    found = compat._too_old(judgement, compat.Build("2.99.0", build, (), "test"), {})
    if needs is None:
        assert f"CUDA {build} needs driver >= ?" in found.cause
        assert f"Install an NVIDIA driver of CUDA {build} or newer " in found.remedy
    else:
        assert f"CUDA {build} needs driver >= {needs}; " in found.cause
        assert f"Install an NVIDIA driver >= {needs.split()[0]} (CUDA {build}) " in found.remedy
    assert "None" not in found.remedy


@pytest.mark.parametrize(
    ("build", "driver", "needs"),
    [
        ("12.5.1", "550.54.15", "555.42.06 (NVIDIA's CUDA toolkit/driver table)"),
        ("13.4", "610.43.02", f"615.71.09 ({_COMPAT_13_4})"),
        ("13.9", "615.71.09", None),
    ],
)
def test_minor_version_compatibility_says_where_the_required_driver_comes_from(
    build: str, driver: str, needs: str | None
) -> None:
    judgement = knowledge.judge_driver(build, driver)
    assert judgement.status == "minor-version-compatibility"
    found = compat._minor_version_compatibility(judgement, driver, {})
    assert found.severity.name == "INFO"
    assert found.id == "driver-minor-version-compat" and found.layer == "compatibility"
    if needs is None:
        assert f"install a driver of CUDA {build} or newer " in found.remedy
    else:
        assert f"CUDA {build} asks for driver >= {needs}; " in found.cause
        assert f"install a driver >= {needs.split()[0]} (CUDA {build}) " in found.remedy
    assert "None" not in found.remedy


TF221 = ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]


@pytest.mark.parametrize(
    ("cc", "archs", "status", "uses"),
    [
        ((7, 5), TF221, "sass", "sm_70"),  # T4: sm_70 SASS runs on 7.5 (same major, higher minor)
        ((8, 6), TF221, "sass", "sm_80"),  # A10 / RTX 3090
        ((8, 9), TF221, "sass", "sm_89"),  # L4 / RTX 4090
        ((8, 0), ["sm_86", "compute_86"], "unsupported", None),  # sm_86 SASS does not run on 8.0, nor PTX 8.6
        ((9, 0), TF221, "ptx", "compute_90"),  # H100: only PTX
        ((10, 0), TF221, "ptx", "compute_90"),  # B200
        ((12, 0), TF221, "ptx", "compute_90"),  # RTX 5090
        ((5, 2), TF221, "unsupported", None),  # Maxwell: below every SASS and the PTX
        ((3, 7), ["sm_35", "sm_50", "sm_60", "sm_70", "sm_75", "compute_80"], "sass", "sm_35"),  # K80 on TF 2.4-2.11
        ((6, 1), ["sm_35", "sm_50", "sm_60", "sm_70", "sm_75", "compute_80"], "sass", "sm_60"),
        ((9, 0), ["sm_90a"], "sass", "sm_90a"),
        ((10, 0), ["sm_90a", "compute_90a"], "unsupported", None),  # arch-specific code has no forward compatibility
        ((7, 5), ["6.0", "7.0"], "sass", "sm_70"),  # the old "X.Y" notation: SASS + PTX of that arch
        ((8, 0), ["6.0", "7.0"], "ptx", "compute_70"),
        ((8, 0), [], "unsupported", None),
    ],
)
def test_judge_arch(cc: tuple[int, int], archs: list[str], status: str, uses: str | None) -> None:
    verdict = knowledge.judge_arch(cc[0], cc[1], knowledge.parse_archs(archs))
    assert (verdict.status, verdict.uses) == (status, uses)


@pytest.mark.parametrize(
    ("loaded", "needed", "ok"),
    [("9.3.0", "9.3", True), ("9.8.0", "9.3.0", True), ("9.1.0", "9.3.0", False), ("8.9.7", "9.3", False),
     ("10.0.0", "9.3", False), ("8.6.0", "8.6", True), ("8.5.0", "8.6", False), ("9.3.0", "9", True)],
)
def test_cudnn_rule(loaded: str, needed: str, ok: bool) -> None:
    """TensorFlow's rule: matching major version and an equal or higher minor version."""
    assert knowledge.cudnn_satisfies(loaded, needed) is ok


@pytest.mark.parametrize(("raw", "text"), [(90300, "9.3.0"), (91000, "9.10.0"), (8907, "8.9.7"), (8600, "8.6.0"), (7605, "7.6.5")])
def test_decode_cudnn_version(raw: int, text: str) -> None:
    assert knowledge.decode_cudnn_version(raw) == text


@pytest.mark.parametrize(
    ("tf", "cuda", "cudnn"),
    [("2.21.0", "12.5", "9.3"), ("2.18.1", "12.5", "9.3"), ("2.17.0", "12.3", "8.9"), ("2.15.1", "12.2", "8.9"),
     ("2.14.0", "11.8", "8.7"), ("2.11.0", "11.2", "8.1"), ("2.4.1", "11.0", "8.0"), ("2.0.0", "10.0", "7.4")],
)
def test_tested_builds(tf: str, cuda: str, cudnn: str) -> None:
    row = knowledge.tested_build(tf)
    assert row is not None and (row["cuda"], row["cudnn"]) == (cuda, cudnn)
    # Every tested build's CUDA has a row in NVIDIA's table, so its driver requirement is known.
    assert knowledge.required_driver(cuda) is not None


def test_libraries_for_cuda12_match_tensorflow_dlopen_names() -> None:
    """The sonames TensorFlow 2.21 dlopens (dso_loader.cc: lib<name>.so.<version>) for CUDA 12 / cuDNN 9."""
    libs = {e["key"]: e for e in knowledge.libraries_for("12.5.1", "9")}
    assert {k: libs[k]["soname"] for k in ("cudart", "cublas", "cublasLt", "cufft", "cusolver", "cusparse", "cudnn")} == {
        "cudart": "libcudart.so.12",
        "cublas": "libcublas.so.12",
        "cublasLt": "libcublasLt.so.12",
        "cufft": "libcufft.so.11",
        "cusolver": "libcusolver.so.11",
        "cusparse": "libcusparse.so.12",
        "cudnn": "libcudnn.so.9",
    }
    required = {k for k, e in libs.items() if e["required"]}
    assert required == {"cudart", "cublas", "cublasLt", "cufft", "cusolver", "cusparse", "cudnn"}


def test_every_data_file_cites_its_source() -> None:
    for name in ("cuda_compat.json", "tf_builds.json", "cuda_libraries.json", "log_patterns.json"):
        assert knowledge.data(name).get("_source"), name


def test_device_map_joins_nvml_cuda_and_tensorflow_on_the_pci_bus_id() -> None:
    """nvidia-smi order (PCI), CUDA's FASTEST_FIRST order, and TensorFlow's GPU:N, which skips the GPU its
    build does not cover (here a Maxwell M60 beside two T4s)."""
    from types import SimpleNamespace as NS

    from gpucheck.rules.devicemap import device_map, device_map_lines, pci_key

    assert pci_key("00000000:3B:00.0") == pci_key("0000:3b:00.0") == (0, 0x3B, 0, 0)
    assert pci_key("garbage") is None
    nvml = [NS(index=i, name=n, pci_bus_id=b, handle_error=None)
            for i, (n, b) in enumerate([("Tesla M60", "00000000:05:00.0"), ("Tesla T4", "00000000:3B:00.0"),
                                        ("Tesla T4", "00000000:D8:00.0")])]
    cuda = [NS(ordinal=0, name="Tesla T4", pci_bus_id="00000000:3B:00.0", cc_major=7, cc_minor=5),
            NS(ordinal=1, name="Tesla T4", pci_bus_id="00000000:D8:00.0", cc_major=7, cc_minor=5),
            NS(ordinal=2, name="Tesla M60", pci_bus_id="00000000:05:00.0", cc_major=5, cc_minor=2)]
    tf = NS(gpus=[NS(name="/physical_device:GPU:0", details={}, capability=None),
                  NS(name="/physical_device:GPU:1", details={}, capability=None)],
            importable=True, version="2.21.0", is_cuda_build=True, list_devices_error=None,
            build_info={"cuda_compute_capabilities": ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]})
    units = {"framework": NS(facts=tf), "tf_setup": None}
    facts = NS(cuda=NS(facts=NS(devices=cuda)), nvml=NS(facts=NS(gpus=nvml)), unit=units.get)
    facts.frameworks = {"tensorflow": tf_view.view(facts)}  # what TensorFlow's unit says of these facts
    rows = [(r.nvml_index, r.cuda_ordinal, r.frameworks.get("tensorflow")) for r in device_map(facts)]  # type: ignore[arg-type]
    assert rows == [(0, 2, None), (1, 0, "GPU:0"), (2, 1, "GPU:1")]
    (line,) = device_map_lines(facts)  # type: ignore[arg-type]
    assert line.endswith("00000000:05:00.0 0/2/-, 00000000:3B:00.0 1/0/GPU:0, 00000000:D8:00.0 2/1/GPU:1")


@pytest.mark.parametrize(
    ("cudnn", "cuda_major", "ok"),
    [("9.3.0", 12, True), ("9.3.0", 13, True), ("8.9.7", 12, True), ("8.9.7", 13, False), ("7.6.5", 12, False),
     ("10.0.0", 12, None)],
)
def test_cudnn_support_matrix(cudnn: str, cuda_major: int, ok: bool | None) -> None:
    assert knowledge.cudnn_supports_cuda(cudnn, cuda_major) is ok


def _compat_facts(driver: str, driver_cuda: int, cc: tuple[int, int]) -> Any:
    """Just what compat_rules reads: the kernel module's version, the CUDA driver's answer with one
    device, TensorFlow 2.21's build (CUDA 12.5.1)."""
    lib = LibraryLoad("libcuda.so.1", True, f"/usr/lib/x86_64-linux-gnu/libcuda.so.{driver}", None)
    dev = CudaDevice(0, "Tesla T4", cc[0], cc[1], 16 * 1024**3, "00000000:00:04.0", None, None)
    cuda = CudaDriverFacts(lib, CudaCall("cuInit", 0, "CUDA_SUCCESS", None), driver_cuda, 1, devices=(dev,))
    build = {"is_cuda_build": True, "cuda_version": "12.5.1", "cuda_compute_capabilities": TF221}
    tf = SimpleNamespace(version="2.21.0", build_info=build)
    return SimpleNamespace(
        kernel=SimpleNamespace(module_version=driver),
        cuda=SimpleNamespace(facts=cuda),
        nvml=SimpleNamespace(facts=None),
        units={"libraries": None, "framework": SimpleNamespace(facts=tf)},
        unit=lambda name: {"framework": SimpleNamespace(facts=tf)}.get(name),
        environment={},
    )


def test_minor_version_compatibility_is_not_driver_too_old() -> None:
    """Issue 12, defect 7: a 550 driver (CUDA 12.4) runs TensorFlow's CUDA 12.5.1 under minor version
    compatibility: a note with an id of its own, never driver-too-old, which fleets count as broken."""
    found = tf_compat.compat_rules(_compat_facts("550.54.15", 12040, (7, 5)), Settings())
    assert [(f.id, f.severity.value) for f in found] == [("driver-minor-version-compat", "info")]
    old = tf_compat.compat_rules(_compat_facts("470.82.01", 11040, (7, 5)), Settings())
    assert [(f.id, f.severity.value) for f in old] == [("driver-too-old", "blocker")]
    # PTX only (an H100 under this build) on the same driver: it cannot JIT-compile CUDA 12.5 PTX.
    ptx = tf_compat.compat_rules(_compat_facts("550.54.15", 12040, (9, 0)), Settings())
    assert [(f.id, f.severity.value) for f in ptx] == [("driver-too-old", "blocker")]


def test_every_info_finding_of_compat_has_an_id_of_its_own() -> None:
    """One id, one cause, at one severity: the ids compat emits as info are never emitted as faults."""
    cases = [("550.54.15", 12040, (7, 5)), ("470.82.01", 11040, (7, 5)), ("550.54.15", 12040, (9, 0)),
             ("555.42.06", 12050, (7, 5)), ("555.42.06", 12050, (9, 0))]
    seen: dict[str, set[str]] = {}
    for driver, cuda, cc in cases:
        for f in tf_compat.compat_rules(_compat_facts(driver, cuda, cc), Settings()):
            seen.setdefault(f.id, set()).add(f.severity.value)
    assert seen["driver-too-old"] == {"blocker"}
    assert seen["driver-minor-version-compat"] == {"info"}

