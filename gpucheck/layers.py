"""The acceleration stack as data: each layer, the layers it ``needs``, and when a run checks it.

A layer is a node of the ``needs`` graph, not a folder: the units (``gpucheck.registry``) say which
layers they answer. Blocking over this graph is ``gpucheck.blocking``. The order is the catalog's
(bottom-up; it breaks ties between root causes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from gpucheck.settings import Settings


@dataclass(frozen=True)
class Layer:
    name: str
    needs: tuple[str, ...]
    #: About a framework (answered by the framework units): not checked with --gpucheck-framework=none (``checked``).
    framework: bool = False
    #: Blockers of a layer it does not need as a whole that still block it: the performance layer needs
    #: ops to reach the GPU (no placement-failed, no soft-placement-fallback), not right results from
    #: them (a GPU that computes wrong is still timed: numerical-mismatch stands as its own root cause).
    blocked_by_ids: tuple[str, ...] = ()
    #: Whether these settings ask for it, for a layer checked only when asked (None: every run).
    asked: Callable[[Settings], bool] | None = None


#: Bottom-up; the order is the catalog's (a test holds them equal).
LAYERS: tuple[Layer, ...] = (
    Layer("hardware", ()),
    Layer("kernel", ("hardware",)),
    Layer("driver", ("kernel",)),
    Layer("visibility", ("driver",)),
    Layer("compatibility", ("visibility",), framework=True),
    Layer("libraries", ("compatibility",), framework=True),
    Layer("framework", ("libraries",), framework=True),
    Layer("placement", ("framework",), framework=True),
    # NVML's memory reading needs the driver and the GPUs' visibility, not TensorFlow.
    Layer("resources", ("visibility",)),
    Layer("health", ("visibility",)),
    Layer(
        "performance",
        ("framework", "resources", "health"),
        framework=True,
        blocked_by_ids=("placement-failed", "soft-placement-fallback"),
        asked=lambda s: s.benchmarks,
    ),
    # As a whole it needs nothing below it: its configuration needs the environment, its peers the network;
    # its collective needs TensorFlow itself (its check asks for that), not the GPUs.
    Layer("cluster", (), asked=lambda s: s.cluster is not None or s.cluster_env_set),
)


@cache
def by_name() -> dict[str, Layer]:
    return {layer.name: layer for layer in LAYERS}


def checked(settings: Settings) -> frozenset[str]:
    """The layers whose facts this run gathers."""
    return frozenset(
        layer.name
        for layer in LAYERS
        if not (layer.framework and not settings.frameworks) and (layer.asked is None or layer.asked(settings))
    )
