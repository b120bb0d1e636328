"""A staged child that runs steps: its first facts, then a shared set-up, then the steps the parent lists
(``GPUCHECK_STEPS``: the ``Unit.steps`` registered for this child, of the layers the run checks).

A framework's child is one: it imports the framework once (most of the time to verdict), hands back its framework
facts first, so that whatever happens later they stand, then runs its set-up and each step. Each hands back its
facts so far with the time its next part may take (:class:`gpucheck.protocol.Checkpoint`): the child writes them at
once, each under its own key, and leaves when a part overruns, naming it; a step that dies leaves the facts of the
steps before it.

A set-up is a function ``(timeout) -> Generator[(facts, budget), None, context | None]``; a step is a function
``(context, timeout) -> Iterator[(facts, budget)]``. An exception a step lets out is recorded under
``step_errors`` and the next step runs. Where the set-up leaves no context, no step runs.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar

from gpucheck.facts import to_json
from gpucheck.protocol import Checkpoint, load_target, steps_from_env, timeout_from_env

R = TypeVar("R")
C = TypeVar("C")

#: A set-up: ``timeout -> Generator[(facts, budget), None, context or None]``.
SetUp = Callable[[float], Generator[tuple[Any, float | None], None, C | None]]


class Landing:
    """The child's JSON so far: the first facts, each step's under its key, ``step_errors``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def land(self, key: str, steps: Generator[tuple[Any, float | None], None, R]) -> Generator[Checkpoint, None, R]:
        """Each of a step's facts under ``key``, written at once with the budget of its next part; the
        step's return value."""
        while True:
            try:
                facts, budget = next(steps)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            self.data = {**self.data, key: to_json(facts)}
            yield Checkpoint(self.data, budget)

    def fault(self, key: str, exc: Exception) -> Checkpoint:
        errors = {**self.data.get("step_errors", {}), key: f"{type(exc).__name__}: {exc}"}
        self.data = {**self.data, "step_errors": errors}
        return Checkpoint(self.data, None)


def first_then_steps(first: Any, go_on: bool, setup_key: str, set_up: SetUp[C]) -> Iterator[Checkpoint]:
    """``first`` (the framework facts) at once; then, where ``go_on``, the set-up under ``setup_key`` and every step
    the parent listed (the set-up's own key is skipped there: it runs once, above, before every step)."""
    facts = Landing(to_json(first))
    yield Checkpoint(facts.data, None)
    if not go_on:
        return
    timeout = timeout_from_env()
    ctx: C | None = None
    try:
        ctx = yield from facts.land(setup_key, set_up(timeout))
    except Exception as exc:  # noqa: BLE001 - a fault of the set-up itself: a fact, and no step can run
        yield facts.fault(setup_key, exc)
    if ctx is None:
        return
    for key, target in steps_from_env():
        if key == setup_key:
            continue
        try:
            step = load_target(target)
            if step is None:
                raise LookupError(f"not a probe step: {target!r}")
            yield from facts.land(key, step(ctx, timeout))
        except Exception as exc:  # noqa: BLE001 - a fault of the step itself: a fact, and the next step runs
            yield facts.fault(key, exc)
