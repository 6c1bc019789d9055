"""The grading settings: what a problem's result depends on, besides the bundle, the suite and
the seed secret. One type for every place that records or compares them (issue 33: they were
declared again in `RunConfig`, the checkpoint's `RunKey` and the round's `Settings`):

- `grader run` grades under them (grading/config.py holds them with the run's other stages);
- the checkpoint keys a run on them, resolved for its suite (`RunKey`), so that `--resume`
  refuses another run's checkpoint and says which setting differs;
- a round commits to them and keeps them in its manifest (round/model.py: `Settings`, these
  and whether references are shared), so that a resumed or committed round must match.

They are written as JSON (a checkpoint's run.json, a round's manifest and commitment) under
the field names here; a model, frozen, that forbids what it does not know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Self

from pydantic import Field, model_validator

from grader.model.scores import Frozen
from grader.sandbox.runtimes import RuntimeKind, runtime_config, runtime_for

Device = Literal["cpu", "cuda"]  # cpu: Triton's interpreter, no timing claims
# auto: smoke shapes on the CPU interpreter (the others take minutes there), all on a GPU.
ShapeSelection = Literal["auto", "all", "smoke", "scored"]

# The settings a checkpoint is keyed on (RunKey), as its run.json has named them since it
# was first written. Not `problems`: each checkpointed problem stands alone, and a resumed
# run may grade more or fewer of them. Not `timeout_s`: a resumed run has always been free to
# change --timeout (checkpoints written before carry no timeout to compare).
CHECKPOINTED = ("policy", "device", "hardware", "runtime", "shapes", "seeds_per_shape")


class GradingSettings(Frozen):
    """What every problem of a grading is graded under."""

    policy: str = "triton"  # a policy's name (a file's is loaded and named by its name)
    device: Device = "cpu"
    runtime: RuntimeKind = "cpu"  # the runtime entries run on (sandbox/runtimes.py)
    hardware: str = "auto"  # a profile name; auto: cpu-interpreter, or matched to the GPU
    # --shapes, with a practice run's folded in (public shapes only: grading/practice.py).
    shapes: ShapeSelection = "auto"
    problems: tuple[str, ...] = Field(default=())  # empty: every problem of the suite
    seeds_per_shape: int | None = None  # input sets per shape; None: the suite's setting
    timeout_s: float | None = None  # wall-clock limit of each entry container, seconds

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        # The runtime refuses a device it cannot serve (--device cuda on cpu's: a UsageError,
        # which pydantic lets through as it is raised, not being a ValueError).
        runtime_for(runtime_config(self.runtime)).check_device(self.device)
        return self

    def but(self, **changes: Any) -> Self:
        """These settings with `changes`, checked as new ones are (pydantic's model_copy does
        not check)."""
        return type(self).model_validate({**self.model_dump(), **changes})

    def for_suite(self, seeds_per_shape: int) -> GradingSettings:
        """The settings as a grading of a suite applies them: the suite's seeds per shape
        unless these name theirs (what a checkpoint records)."""
        return GradingSettings.model_validate(
            {**self.model_dump(include=set(GradingSettings.model_fields)),
             "seeds_per_shape": self.seeds_per_shape or seeds_per_shape})

    def checkpointed(self) -> dict[str, object]:
        """The settings a checkpoint is keyed on, by their run.json names (CHECKPOINTED)."""
        dumped = self.model_dump(mode="json")
        return {k: dumped[k] for k in CHECKPOINTED}

    @classmethod
    def from_checkpoint(cls, saved: dict[str, object]) -> GradingSettings:
        """The settings a run.json recorded; KeyError for one it lacks, ValueError (pydantic's
        ValidationError) for one it does not know or cannot hold."""
        missing = [k for k in CHECKPOINTED if k not in saved]
        if missing:
            raise KeyError(missing[0])
        return cls.model_validate(saved)


@dataclass(frozen=True, kw_only=True)
class Narrowing:
    """-k and --last-failed: which shapes of the selected ones this run grades. A narrowing of
    one run, never part of its settings: a checkpoint's run is resumed whole (config.py)."""

    # -k: only the shapes whose PROBLEM/SHAPE contains one of these (as pytest's -k, by
    # substring); empty: every shape --shapes selects.
    keywords: tuple[str, ...] = ()
    # --last-failed (grading/last_failed.py): only these PROBLEM/SHAPE ids, `PROBLEM/*` for a
    # whole problem; empty: no such narrowing.
    only_shapes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.keywords or self.only_shapes)

    def picks(self, problem: str, shape: str) -> bool:
        """Whether -k and --last-failed leave `shape` of `problem` in."""
        name = f"{problem}/{shape}"
        return ((not self.keywords or any(k in name for k in self.keywords))
                and (not self.only_shapes or name in self.only_shapes
                     or f"{problem}/*" in self.only_shapes))

    def picks_any(self, problem: str, shapes: list[str]) -> bool:
        """Whether -k and --last-failed leave any of `shapes` in (a problem they leave none
        of is not graded at all, rather than graded `missing`)."""
        return not self or any(self.picks(problem, s) for s in shapes)
