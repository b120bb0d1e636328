"""The libraries probe's pure parts, against the real TensorFlow 2.21 wheel installed here: TensorFlow
found and its build read without importing it, the RUNPATH of its own objects, the loader's order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpucheck.frameworks.tensorflow import libraries as probe
from gpucheck.frameworks.tensorflow.facts import CudaLibrary, SearchDir
from gpucheck.frameworks.tensorflow.rules.libraries import missing_dependency


def test_framework_found_and_build_read_without_import() -> None:
    code = (
        "import sys\nfrom gpucheck.frameworks.tensorflow.libraries import locate_framework, read_build_info\n"
        "loc, _ = locate_framework()\ninfo = read_build_info(loc / 'python' / 'platform' / 'build_info.py')\n"
        "print(info['cuda_version'], info['cudnn_version'], 'tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["12.5.1", "9", "False"]


def test_wheel_requirements_and_version() -> None:
    location, _ = probe.locate_framework()
    version, reqs = probe.framework_distribution(location)
    assert version == "2.21.0"
    assert reqs["nvidia-cudnn-cu12"] == "9.3.0.75" and reqs["nvidia-cuda-runtime-cu12"] == "12.5.82"


def test_runpath_of_tensorflow_points_at_the_nvidia_wheels() -> None:
    location, _ = probe.locate_framework()
    assert location is not None
    dirs = probe.runpath_dirs(location / "libtensorflow_framework.so.2")
    site = str(location.parent)
    for wheel in ("cuda_runtime", "cublas", "cudnn", "cufft", "cusparse", "nccl"):
        assert f"{site}/nvidia/{wheel}/lib" in dirs
    assert all("$ORIGIN" not in d for d in dirs)


def test_elf_reader_ignores_non_elf(tmp_path: Path) -> None:
    (tmp_path / "x.so").write_text("not an ELF")
    assert probe.elf_dynamic(tmp_path / "x.so") == {}
    assert probe.elf_dynamic(tmp_path / "missing.so") == {}


def test_loader_order_ld_library_path_before_runpath(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """glibc: LD_LIBRARY_PATH, then the caller's DT_RUNPATH, then the ldconfig cache, then default directories."""
    first, second = tmp_path / "env", tmp_path / "runpath"
    for d in (first, second):
        d.mkdir()
        (d / "libcudart.so.12").write_text("")
    (second / "libcudart.so.13").write_text("")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(first))
    order = [*probe.search_order(None), SearchDir(str(second), "RUNPATH of libtensorflow_framework.so.2")]
    path, via, shadowed = probe.resolve("libcudart.so.12", order, {})
    assert (path, via, shadowed) == (str(first / "libcudart.so.12"), "LD_LIBRARY_PATH", [str(second / "libcudart.so.12")])
    assert probe.resolve("libcudnn.so.9", order, {}) == (None, None, [])
    assert str(second / "libcudart.so.13") in probe.other_versions("libcudart.so.12", order, {})


def test_ldconfig_cache_is_read() -> None:
    cache = probe.ldconfig_cache()
    assert any(name.startswith("libc.so") for name in cache)


@pytest.mark.parametrize(
    ("flags", "value"),
    [("--xla_gpu_cuda_data_dir=/opt/cuda-12.5", "/opt/cuda-12.5"),
     ("--xla_gpu_autotune_level=0 --xla_gpu_cuda_data_dir=/usr/local/cuda-12.5 --xla_dump_to=/tmp", "/usr/local/cuda-12.5"),
     ("--xla_gpu_autotune_level=0", None),
     ("", None)],
)
def test_xla_data_dir(flags: str, value: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLA_FLAGS", flags)
    assert probe.xla_cuda_data_dir() == value


def test_missing_dependency_is_read_from_the_loaders_message() -> None:
    lib = CudaLibrary("cusparse", "libcusparse.so.12", None, None, True, "/x/libcusparse.so.12.5.1.3", "LD_LIBRARY_PATH",
                      False, "libnvJitLink.so.12: cannot open shared object file: No such file or directory", None, None)
    assert missing_dependency(lib) == "libnvJitLink.so.12"
    absent = CudaLibrary("cudart", "libcudart.so.12", None, None, True, None, None, False,
                         "libcudart.so.12: cannot open shared object file: No such file or directory", None, None)
    assert missing_dependency(absent) is None


#: TensorFlow 2.21's TryDlopenCUDALibraries list for its CUDA 12 build with cuDNN 9 (``required`` in
#: gpucheck/data/cuda_libraries.json), in that file's order.
REGISTERS_NO_GPU_WITHOUT = ("libcudart.so.12", "libcublas.so.12", "libcublasLt.so.12", "libcufft.so.11",
                            "libcusolver.so.11", "libcusparse.so.12", "libcudnn.so.9")


def test_the_libraries_tensorflow_registers_no_gpu_without(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a memory-setting child asks before it imports TensorFlow: none of the libraries is installed here (no
    nvidia-* wheels, none in the ldconfig cache), so all are named; a file on LD_LIBRARY_PATH takes its library off
    the list, whatever its contents (whether it loads is the import's to tell); with libraries preloaded nothing is
    judged, since dlopen takes a preloaded library by its soname wherever its file lies."""
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    assert probe.registers_no_gpu_without() == REGISTERS_NO_GPU_WITHOUT
    for name in ("libcudart.so.12", "libcudnn.so.9"):
        (tmp_path / name).write_bytes(b"")
    assert probe.registers_no_gpu_without() == tuple(
        n for n in REGISTERS_NO_GPU_WITHOUT if n not in {"libcudart.so.12", "libcudnn.so.9"})
    for name in REGISTERS_NO_GPU_WITHOUT:
        (tmp_path / name).write_bytes(b"")
    assert probe.registers_no_gpu_without() == ()
    for name in REGISTERS_NO_GPU_WITHOUT:
        (tmp_path / name).unlink()
    monkeypatch.setenv("LD_PRELOAD", str(tmp_path / "elsewhere" / "libcudart.so.12"))
    assert probe.registers_no_gpu_without() == ()
    # Without ldconfig's cache (no ldconfig, or it failed), what only /etc/ld.so.cache lists would look missing.
    monkeypatch.delenv("LD_PRELOAD")
    assert probe.registers_no_gpu_without() == REGISTERS_NO_GPU_WITHOUT
    monkeypatch.setattr(probe, "ldconfig_cache", dict)
    assert probe.registers_no_gpu_without() == ()
