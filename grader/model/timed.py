"""A shape's timed loop as the host plans it: a fresh seed for every call, and which calls
are checked (issue 31). Pure.

Every timed call's inputs are drawn on the device from a seed of its own (harness/fresh.py),
so no call sees values the entry has seen before. The seeds of a shape are a pool derived from
its first checked case's secret seed: the same for every entry of a round, so that the
reference outputs of the checked seeds are computed once per round. Each entry takes the pool
in an order of its own (`order_key`: its kernel file's digest under the run's secret), each
seed at most once.

Checked calls: `CHECKS_FIRST` of the first `min_samples` calls, then one in every
`CHECK_EVERY`, at positions drawn for the entry, and the loop's last call, which the harness
makes once it has decided to stop. Every call's outputs are sampled alike, so the entry cannot
tell the checked ones from the others; the reference computes the checked seeds' samples
(`Case(timing=True)`), and the judge compares them with the entry's.

The checked seeds fill the checked positions in their own order, the same for every entry
(which seed is checked where is no more visible to the entry than the seeds themselves), so
that a loop of n calls reaches a prefix of them, and the last. The reference computes that
prefix for the first `EAGER_BLOCKS` blocks after the first (`eager`) before any entry runs;
a loop that runs further gets the rest computed once it has (issue 32: most loops stop after
11 calls, where 5 of a shape's 36 checked seeds are reached, and the references of the
costliest problems spent most of their time on the other 31).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import random
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

CHECKS_FIRST = 4  # checked calls among the first min_samples
CHECK_EVERY = 16  # one checked call in each block of this many after those
# Blocks after the first whose checked seeds the reference computes before any entry's loop:
# with the defaults, loops of up to 58 calls (120 of 125 shapes on the H200, 2026-12-05).
EAGER_BLOCKS = 3


def checked_count(min_samples: int, max_samples: int) -> int:
    """How many checked seeds one shape needs: the first block's, one per later block, and
    the last call's."""
    first = min(CHECKS_FIRST, min_samples)
    return first + math.ceil(max(max_samples - min_samples, 0) / CHECK_EVERY) + 1


def eager(checked: list[T]) -> list[T]:
    """Of one shape's checked cases, in order (the last is the loop's closing call), those
    the reference computes before any entry's loop: the first block's, the next
    EAGER_BLOCKS blocks' and the last. A loop that reaches beyond them gets the rest
    computed after it has run (run.pair: with a held reference's GO; else
    grading.worker's top-up run)."""
    head = CHECKS_FIRST + EAGER_BLOCKS
    return checked if len(checked) <= head + 1 else [*checked[:head], checked[-1]]


def _derive(key: bytes, label: str) -> int:
    """A 31-bit seed (what every recipe's generator takes: torch, numpy, random)."""
    digest = hmac.new(key, label.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF


def _pool_key(checked: list[tuple[str, int]]) -> bytes:
    """What a shape's pool and warm-up seed derive from: its first checked case's secret seed."""
    return b"%d" % checked[0][1]


def _warm(checked: list[tuple[str, int]]) -> int:
    return _derive(_pool_key(checked), "warm")


def _pool(checked: list[tuple[str, int]], n: int) -> list[int]:
    """`n` seeds of the shape's pool, none equal to another, to a checked seed or to the warm
    one (31 bits collide now and then)."""
    pool_key = _pool_key(checked)
    taken = {seed for _cid, seed in checked} | {_warm(checked)}
    out: list[int] = []
    j = 0
    while len(out) < n:
        seed = _derive(pool_key, f"pool/{j}")
        j += 1
        if seed not in taken:
            taken.add(seed)
            out.append(seed)
    return out


@dataclass(frozen=True, kw_only=True)
class TimedPlan:
    """One shape's timed loop for one entry: `calls[i]` is call i's (seed, checked case id or
    None); `last` the call made once the loop stops; `warm` the warm-up call's seed."""

    warm: int
    calls: tuple[tuple[int, str | None], ...]
    last: tuple[int, str]

    def checked(self, samples: int) -> list[str]:
        """The case ids a loop of `samples` timed calls checked (its last one included)."""
        if samples < 1:
            return []
        reached = [cid for _seed, cid in self.calls[:samples - 1] if cid is not None]
        return [*reached, self.last[1]]

    def as_job(self) -> dict[str, object]:
        return {"warm": self.warm, "calls": [list(c) for c in self.calls],
                "last": list(self.last)}


def plan(checked: list[tuple[str, int]], order_key: bytes, *, min_samples: int,
         max_samples: int) -> TimedPlan:
    """The plan from a shape's checked cases ((id, secret seed), checked_count of them) and
    the entry's `order_key`."""
    needed = checked_count(min_samples, max_samples)
    if len(checked) != needed:
        raise ValueError(f"{len(checked)} checked cases, {needed} needed")
    rng = random.Random(_derive(order_key, f"order/{checked[0][1]}"))
    first = min(CHECKS_FIRST, min_samples)
    positions = set(rng.sample(range(min_samples), first))
    for start in range(min_samples, max_samples, CHECK_EVERY):
        positions.add(rng.randrange(start, min(start + CHECK_EVERY, max_samples)))
    order = checked[-2::-1]  # popped: the k-th checked position gets the k-th checked case
    pool = _pool(checked, max_samples - len(positions))
    rng.shuffle(pool)
    calls: list[tuple[int, str | None]] = []
    for i in range(max_samples):
        if i in positions:
            cid, seed = order.pop()
            calls.append((seed, cid))
        else:
            calls.append((pool.pop(), None))
    last_id, last_seed = checked[-1]
    return TimedPlan(warm=_warm(checked), calls=tuple(calls), last=(last_seed, last_id))


def reference_calls(checked: list[tuple[str, int]], n: int) -> list[int]:
    """Seeds for the reference's own timed loop (the report's speed-up column): the pool's
    first `n`, never a checked seed."""
    return _pool(checked, n)
