"""What a framework's collective does for the cluster child (``gpucheck.cluster.probe``): the contract between
the cluster unit and the framework unit that runs the collective (a ``Step`` of the cluster child, under the key
``collective``: a function that returns a :class:`Collective`). The cluster child reaches the peers itself; only
then does it start the framework, through this.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol

from gpucheck.cluster.config import split_address
from gpucheck.cluster.facts import ClusterConfigFacts, CollectiveRun

#: The key of the collective's step in the cluster child's GPUCHECK_STEPS.
COLLECTIVE_STEP = "collective"
#: How often a peer that refused is tried again, and the longest one connect may take.
RETRY_S = 0.25
CONNECT_S = 2.0
#: The all-reduces: a tiny one for latency, a large one for bandwidth (float32 elements), and their rounds.
SMALL_ELEMENTS = 4
LARGE_ELEMENTS = 1 << 20
LATENCY_ROUNDS = 20
BANDWIDTH_ROUNDS = 5
#: What the chief of a parameter-server cluster writes, once its steps are done, into the working directory of
#: each worker and ps (an op placed on their device: it runs in their process, on their host). A path relative
#: to the server's own directory, so that the chief need not know where that is on another host; every probe child
#: starts in a fresh folder of its own (``gpucheck.isolation``), so no earlier run's file is there.
CHIEF_DONE_FILE = "gpucheck-chief-done"
#: What ended a server's serving (``CollectiveRun.served_until``).
BY_FILE, BY_PORT = "the chief's file", "the chief's port closing"


class Collective(Protocol):
    """A framework's side of the cluster child: it joins the cluster as a role ("collective": every task of an
    all-reduce; "coordinator": the chief of a parameter-server cluster; "server": its workers and ps) and runs
    that role's work."""

    def start(self, config: ClusterConfigFacts, role: str, deadline: float) -> tuple[str, Any]:
        """Import the framework and join the cluster: (the framework's version, its strategy or server)."""
        ...

    def work(self, role: str, strategy: Any, config: ClusterConfigFacts, deadline: float) -> CollectiveRun | None:
        """The role's work: the all-reduce, the parameter-server smoke test, or serving until the chief is done."""
        ...

    def strategy_name(self, role: str) -> str:
        """The role's strategy, as the framework names it (the task's facts)."""
        ...


def rounds(fn: Callable[[], Any], count: int) -> list[float]:
    out = []
    for _ in range(count):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def serve_until_chief_done(config: ClusterConfigFacts, deadline: float) -> str:
    """A worker or ps of a parameter-server cluster serves the chief; done once the chief says so (its
    :data:`CHIEF_DONE_FILE` in this process's working directory) or has come and gone (its port closes when
    its process ends). The file is what closes the race: a chief that needs only a second once this server is
    up may have come and gone before this process first looks (a loaded machine), and its port alone would then
    read as a chief that never came. Returns what ended it (:data:`BY_FILE`, :data:`BY_PORT`)."""
    chief = next((j.addresses[0] for j in config.jobs if j.name == "chief" and j.addresses), None)
    parsed = split_address(chief) if chief else "no chief"
    if isinstance(parsed, str):
        return BY_PORT
    seen = False
    while time.monotonic() < deadline:
        if os.path.exists(CHIEF_DONE_FILE):
            return BY_FILE
        try:
            with socket.create_connection(parsed, timeout=CONNECT_S):
                seen = True
        except OSError:
            if seen:
                # The chief writes its file before it ends: looked at again, it says which of the two came first.
                return BY_FILE if os.path.exists(CHIEF_DONE_FILE) else BY_PORT
        time.sleep(RETRY_S)
    raise TimeoutError(
        f"the chief ({chief}) never came" if not seen else f"the chief ({chief}) did not finish its steps in time"
    )
