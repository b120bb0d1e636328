"""GPU tests as a team writes them with gpucheck's marker and fixtures."""

import pytest
from record import record


@pytest.mark.gpu
def test_matmul_on_the_gpu(tf_gpu_device, gpus):
    import tensorflow as tf
    from tensorflow.python.client import device_lib

    with tf.device(tf_gpu_device):
        a = tf.ones((64, 64))
        b = tf.linalg.matmul(a, a)
    assert b.device.endswith("device:" + tf_gpu_device.lstrip("/")), b.device
    limits = [d.memory_limit for d in device_lib.list_local_devices() if d.device_type == "GPU"]
    record("matmul", device=tf_gpu_device, ran_on=b.device, gpus=[g.to_json() for g in gpus], memory_limits=limits)


@pytest.mark.gpu(count=2, min_memory="8GiB")
def test_data_parallel_step(gpus):
    assert len(gpus) == 2
    record("two_gpus", gpus=[g.to_json() for g in gpus])


@pytest.mark.gpu(framework=None)
def test_driver_lists_the_gpu(gpus, gpucheck_result):
    record("driver_level", gpus=[g.to_json() for g in gpus], verdict=gpucheck_result.verdict)
