"""PyTorch's resources layer without starting CUDA (issue 36, point 2, "Resources"), in-process: the allocator
configuration parsed as torch parses it and its refusal, and /dev/shm for NCCL. The real child on torch's real CUDA
build is tests/test_torch_cuda_scenarios.py's ``test_resources_on_an_eight_gpu_container``.

Sources:

- ``import torch`` aborted by ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments``: pytorch/pytorch#186453 (the reporter's
  lines), and the ValueError the fix proposed there raises instead: pytorch/pytorch#186607;
- what torch 2.14.1+cu130 does with each configuration below: its own parser (``torch._C._accelerator_setAllocatorSettings``)
  and ``import torch`` with the value in ``PYTORCH_CUDA_ALLOC_CONF``, run on this host (2026-11-28, the venv of
  tests/pyenvs.py ``torch_cuda_python``): the values without ``:value`` aborted ``import torch`` with "terminate called
  after throwing an instance of 'c10::Error' / what(): i < config_.size() INTERNAL ASSERT FAILED at
  \"/__w/pytorch/pytorch/c10/core/AllocatorConfig.h\":124, please report a bug to PyTorch. Index out of bounds in
  ConfigTokenizer" (SIGABRT, exit 134); the others imported;
- /dev/shm: this machine's own ``os.statvfs("/dev/shm")``; Docker's default 64 MB (docker run's ``--shm-size``
  default; NVIDIA/nccl#342: "By default, the shm size is limited to 64MB under docker") as a tmpfs mounted with
  ``size=64m`` gives it here (``unshare -Urm`` then ``mount -t tmpfs -o size=64m``: f_frsize 4096, f_blocks 16384);
  the ``df /dev/shm`` of a container in gitlab-org/gitlab#281199 ("shm 65536 0 65536 0% /dev/shm", 1K-blocks) is the
  same size.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from gpucheck.facts import ChildExit, ProbeOutcome
from gpucheck.frameworks.torch import memory
from gpucheck.frameworks.torch.facts import SharedMemory, TorchFacts
from gpucheck.frameworks.torch.rules.framework import framework_rules
from gpucheck.frameworks.torch.rules.resources import not_checked, resources_rules
from tests.factsbuild import replace_facts
from tests.test_torch_rules import OK_EXIT, TORCH, cuda_build, machine

#: (value, whether torch 2.14.1's ``import torch`` aborted on it, what its parser said), as run here (module docstring).
TORCH_2_14 = [
    ("", False, None),
    ("expandable_segments:True,", False, None),
    (" expandable_segments : True ", False, None),
    ("roundup_power2_divisions:[256:1,>:4]", False, None),
    ("expandable_segments:True,bogus_key:1", False, "Unrecognized key 'bogus_key' in Accelerator allocator config."),
    ("expandable_segments=True", True, None),
    ("expandable_segments", True, None),
    ("bogus_key", True, None),
    (":1", True, None),
    ("expandable_segments:True,bogus", True, None),
    ("roundup_power2_divisions:[256:1", True, None),
    ("expandable_segments:True,,max_split_size_mb:128", False, "Unrecognized key ',' in Accelerator allocator config."),
    ("expandable_segments:True:False", True, None),
]
#: Docker's default /dev/shm as statvfs reads it (module docstring).
DOCKER_64M = os.statvfs_result((4096, 4096, 16384, 16384, 16384, 3085510, 3085509, 3085509, 4096, 255))
#: ``import torch`` aborted by ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments`` (pytorch/pytorch#186453, the reporter's
#: own lines; torch 2.14.1 here says the same with its build path).
ABORTED = ChildExit(
    "crashed", -6, "SIGABRT", 1.9,
    ("terminate called after throwing an instance of 'c10::Error'",
     "  what():  i < config_.size() INTERNAL ASSERT FAILED at \"/pytorch/c10/core/AllocatorConfig.h\":124, please "
     "report a bug to PyTorch. Index out of bounds in ConfigTokenizer"),
    "import torch", None,
)
#: What the fix proposed for it raises instead (pytorch/pytorch#186607, its description's "After").
RAISED = (
    "ValueError: Error parsing the allocator config: reached the end of the configuration string while more tokens "
    "were expected. The config is malformed, for example a key with no value or a trailing ':' or ','."
)


@pytest.mark.parametrize(("value", "aborted", "said"), TORCH_2_14)
def test_the_form_is_read_as_torch_reads_it(value: str, aborted: bool, said: str | None) -> None:
    parsed = memory.parse(value)
    # Every value torch's loading aborted on is malformed here; a value it imported is malformed here only where its
    # parser then refused it ("Unrecognized key ','": an empty option, a second ':').
    if aborted:
        assert parsed.malformed is not None, value
    elif said is None or "bogus_key" in said:
        assert parsed.malformed is None, (value, parsed.malformed)
    else:
        assert parsed.malformed is not None, value
    if value == "expandable_segments:True,bogus_key:1":
        assert parsed.keys == ("expandable_segments", "bogus_key")


def test_keys_are_looked_up_as_strings_the_library_holds() -> None:
    # How the literals lie in torch 2.14.1's libc10_cuda.so (bytes read there): NUL-separated, one a tail of another.
    data = b"dNumRegisterThreads\x00backend\x00release_lock_on_hipmalloc\x00release_lock_on_cudamalloc\x00"
    assert memory.library_holds(data, "backend") and memory.library_holds(data, "release_lock_on_cudamalloc")
    assert not memory.library_holds(data, "release_lock")  # a head of a literal is no key
    configs = memory.allocator_configs(
        {"PYTORCH_CUDA_ALLOC_CONF": "backend:native,bogus_key:1", "PYTORCH_ALLOC_CONF": "backend:native"},
        {"libc10_cuda.so": data + b"PYTORCH_CUDA_ALLOC_CONF\x00"},
    )
    # PYTORCH_ALLOC_CONF is left alone where the build does not read it (its name is not in its libraries).
    assert [(c.variable, c.unknown) for c in configs] == [("PYTORCH_CUDA_ALLOC_CONF", ("bogus_key",))]


def test_an_unknown_option_is_memory_config_failed_with_torchs_words() -> None:
    said = "Unrecognized key 'bogus_key' in Accelerator allocator config."
    config = memory.allocator_configs(
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,bogus_key:1"},
        {"libc10.so": b"\x00expandable_segments\x00PYTORCH_CUDA_ALLOC_CONF\x00"},
        lambda value: said,
    )
    facts = machine(cuda_build(allocator=config))
    [found] = resources_rules(facts, TORCH)
    assert found.id == "memory-config-failed" and found.severity.value == "blocker"
    assert "does not know the option bogus_key" in found.summary and found.evidence["torch_said"] == said
    assert "remove bogus_key" in found.remedy and "expandable_segments" in found.remedy
    # The same configuration with only known keys and torch's parser content: nothing.
    fine = dataclasses.replace(config[0], unknown=(), torch_said=None)
    assert resources_rules(machine(cuda_build(allocator=(fine,))), TORCH) == []


def test_a_malformed_configuration_that_aborted_import_torch_names_it() -> None:
    facts = replace_facts(
        machine(None), TORCH, torch=ProbeOutcome("torch", ABORTED, None),
        environment={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments"},
    )
    [found] = framework_rules(facts, TORCH)
    assert found.id == "framework-crashed"
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments is not a list of key:value options" in found.cause
    assert "Index out of bounds in ConfigTokenizer" in found.cause and found.evidence["malformed"]
    assert found.remedy.startswith("Correct PYTORCH_CUDA_ALLOC_CONF")
    # Without such a configuration the crash keeps its words.
    plain = replace_facts(facts, TORCH, environment={})
    assert "PYTORCH_CUDA_ALLOC_CONF" not in framework_rules(plain, TORCH)[0].cause
    # A torch that raises instead: the failed import is framework-missing, with the configuration as its cause and
    # not "pip install torch" as its remedy.
    raised = replace_facts(facts, TORCH, torch=ProbeOutcome("torch", OK_EXIT, TorchFacts(False, RAISED)))
    [found] = framework_rules(raised, TORCH)
    assert found.id == "framework-missing" and found.remedy.startswith("Correct PYTORCH_CUDA_ALLOC_CONF")
    other = replace_facts(raised, TORCH, torch=ProbeOutcome("torch", OK_EXIT, TorchFacts(False, "No module named 'torch'")))
    assert "pip install torch" in framework_rules(other, TORCH)[0].remedy


def shm_facts(shm: SharedMemory, gpus: int, **environment: str) -> object:
    return replace_facts(
        machine(cuda_build(device_count=gpus)), TORCH, torch_shm=shm, environment=environment,
    )


def test_docker_default_dev_shm_on_eight_gpus_is_nccl_shm_failed() -> None:
    shm = memory.shared_memory("/dev/shm", DOCKER_64M, True)
    assert (shm.size, shm.free) == (64 << 20, 64 << 20)
    [found] = resources_rules(shm_facts(shm, 8), TORCH)  # type: ignore[arg-type]
    assert found.id == "nccl-shm-failed" and found.severity.value == "degraded"
    assert found.summary == "/dev/shm has 64 MiB free of 64 MiB: NCCL between this machine's 8 GPUs will fail to start."
    assert "--shm-size=1g" in found.remedy and "emptyDir" in found.remedy and "--ipc=host" in found.remedy
    # One GPU: NCCL has no peer here; NCCL_SHM_DISABLE=1: it does not use the transport. Not checked, saying why.
    for facts in (shm_facts(shm, 1), shm_facts(shm, 8, NCCL_SHM_DISABLE="1")):
        assert resources_rules(facts, TORCH) == []  # type: ignore[arg-type]
        assert "nccl-shm-failed" in not_checked(facts, TORCH)  # type: ignore[arg-type]


def test_this_machines_own_dev_shm_holds_nccls_segments() -> None:
    shm = memory.read_shared_memory(Path("/"))
    assert shm.error is None and shm.size == os.statvfs("/dev/shm").f_frsize * os.statvfs("/dev/shm").f_blocks
    facts = shm_facts(shm, 8)
    if shm.free is not None and shm.free < memory.NCCL_SHM_BYTES:
        assert [f.id for f in resources_rules(facts, TORCH)] == ["nccl-shm-failed"]  # type: ignore[arg-type]
    else:  # this host: a tmpfs of 24 GiB
        assert resources_rules(facts, TORCH) == [] and not_checked(facts, TORCH) == {}  # type: ignore[arg-type]
    missing = memory.read_shared_memory(Path("/nonexistent-host-view"))
    assert missing.size is None and "FileNotFoundError" in (missing.error or "")
    assert "could not be read" in not_checked(shm_facts(missing, 8), TORCH)["nccl-shm-failed"]  # type: ignore[arg-type]
