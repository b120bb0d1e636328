"""GPU tests as a PyTorch team writes them with gpucheck's marker and the torch_device fixture. torch is imported
in the tests, as the fixture imports it: collecting this file does not load torch."""

import pytest
from record import record


@pytest.mark.gpu(framework="torch")
def test_matmul_on_the_gpu(torch_device, gpus):
    import torch

    a = torch.ones(64, 64, device=torch_device)
    b = a @ a
    assert b.device == torch_device and float(b[0, 0]) == 64.0
    record(
        "torch_matmul", device=str(torch_device), ran_on=str(b.device), gpus=[g.to_json() for g in gpus],
        memory_fraction=torch.cuda.get_per_process_memory_fraction(torch_device),
    )


@pytest.mark.gpu
def test_training_step(torch_device):
    """A bare marker: PyTorch, the framework installed here."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1).to(torch_device)
    x, y = torch.randn(32, 16, device=torch_device), torch.randn(32, 1, device=torch_device)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    assert model.weight.grad is not None and model.weight.grad.device == torch_device
    record("torch_step", device=str(torch_device), loss=float(loss))


@pytest.mark.gpu(count=2, min_memory="8GiB", framework="torch")
def test_data_parallel_step(gpus):
    assert [g.device for g in gpus] == ["cuda:0", "cuda:1"]
    record("torch_two_gpus", gpus=[g.to_json() for g in gpus])


@pytest.mark.gpu(framework=None)
def test_the_driver_lists_a_gpu_for_torch(gpus, torch_device):
    """Marked for the CUDA driver's GPUs; torch_device asks PyTorch for the same GPUs."""
    record("torch_driver_level", gpus=[g.to_json() for g in gpus], device=str(torch_device))


def test_batches_split_evenly():
    """A plain test: no marker, no GPU, no torch."""
    assert [len(b) for b in (list(range(10))[i:i + 4] for i in range(0, 10, 4))] == [4, 4, 2]
    record("torch_unmarked")
