"""Pacing: a miner fits its inner steps to the time left before the upload deadline.

An upload that lands after the deadline scores 0 (``late``), so a miner on a slow or busy
machine must know the deadline it races, in seconds, and adapt instead of failing every window:

* ``BlockTimer`` turns the window clock's deadline block into seconds: it measures the chain's
  block time from the blocks the neuron sees (the chain's nominal block time until it has two).
* ``Pace`` remembers how long one inner step takes and how long compressing and uploading take
  (moving averages, so a machine that gets busier is noticed within a window or two);
  ``margin_s`` is the headroom kept before the deadline and ``explain`` the numbers for a log.
* ``train_paced`` fits the work to the time: all ``H`` steps, fewer (at least the protocol's
  ``inner.min_steps``), or none (``abandoned``: skip the window rather than upload late). It
  trains in chunks and re-checks the clock between them. Its first chunk is one
  step that re-measures the step time, so a stale figure (the machine was busier an hour ago)
  can never make a miner skip window after window without trying; a first window (nothing
  measured) or a sudden slowdown still stops in time.

A miner that trains ``k < H`` steps uploads the receipt of the first ``k x micro_batch x
accumulation`` of its assigned samples, and validators credit it ``k / H`` of its score
(docs/protocol.md, "Partial uploads"). Nothing here does I/O: the clock and the training
function come in as arguments.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from torch import nn
from torch.optim import Optimizer

from ..training import train_inner
from ..training.config import InnerConfig
from ..training.inner import Batch, InnerResult


@dataclass
class BlockTimer:
    """Seconds per block, measured from ``(block, time)`` observations of the chain head."""

    nominal_s: float = 12.0  # the chain's own figure, used until two blocks are observed
    # The last 16 blocks: enough to average out when a poll saw each, few enough that a block
    # time that changes (a local run's pacemaker) is followed within one window.
    seen: deque = field(default_factory=lambda: deque(maxlen=16))

    def observe(self, block: int, t: float) -> None:
        """Note that the head was ``block`` at monotonic time ``t`` (the first sighting counts)."""
        if not self.seen or block > self.seen[-1][0]:
            self.seen.append((block, t))

    def seconds_per_block(self) -> float:
        """Measured over the observations kept; the nominal block time before that."""
        if len(self.seen) < 2 or self.seen[-1][0] == self.seen[0][0]:
            return self.nominal_s
        (b0, t0), (b1, t1) = self.seen[0], self.seen[-1]
        return max(1e-3, (t1 - t0) / (b1 - b0))

    def seconds_until(self, block: int, now: float) -> float:
        """Predicted seconds from ``now`` until the chain produces ``block`` (negative: past)."""
        if not self.seen:
            return math.inf
        last_block, last_t = self.seen[-1]
        return (block - last_block) * self.seconds_per_block() - (now - last_t)


@dataclass
class Pace:
    """Moving averages of what a window's work costs on this machine right now."""

    alpha: float = 0.5
    step_s: float | None = None  # one inner step (forward, backward, optimizer)
    tail_s: float | None = None  # after training: pseudo-gradient, compression, upload

    def observe_steps(self, steps: int, seconds: float) -> None:
        """Fold in ``steps`` steps that took ``seconds``."""
        if steps > 0:
            self.step_s = _ema(self.step_s, seconds / steps, self.alpha)

    def observe_tail(self, seconds: float) -> None:
        """Fold in one window's time from the end of training to the upload being written."""
        self.tail_s = _ema(self.tail_s, seconds, self.alpha)


def _ema(old: float | None, new: float, alpha: float) -> float:
    return new if old is None else (1 - alpha) * old + alpha * new


def margin_s(seconds_left: float, block_s: float) -> float:
    """Headroom kept before the deadline: one block (the validator may act on the deadline
    block as soon as it exists, and ours is seen up to a poll late) plus 10% of the time left
    (timing noise on a busy machine)."""
    return block_s + 0.1 * max(0.0, seconds_left)


def explain(seconds_left: float, pace: Pace, margin: float) -> str:
    """The numbers behind a pacing decision, for a log line or a metrics record."""
    step = f"{pace.step_s:.2f} s per step" if pace.step_s is not None else "step time unknown"
    return (
        f"{seconds_left:.1f} s left before the upload deadline, {step}, "
        f"{pace.tail_s or 0.0:.1f} s to compress and upload, {margin:.1f} s margin"
    )


@dataclass(frozen=True)
class PacedResult:
    """What ``train_paced`` did; ``stopped`` says why it trained fewer steps than planned."""

    result: InnerResult
    stopped: str  # "" (all planned steps), "deadline", "data" or "abandoned"


def train_paced(
    model: nn.Module,
    batches: Iterable[Batch],
    cfg: InnerConfig,
    optimizer: Optimizer,
    *,
    steps: int,
    seconds_left: Callable[[], float],
    pace: Pace,
    train: Callable[..., InnerResult] = train_inner,
    max_chunk_s: float = 1.0,
) -> PacedResult:
    """Train up to ``steps`` steps in chunks, stopping when the next chunk would not fit.

    ``seconds_left()`` is the time left for training (the deadline minus upload time and
    margin). The first chunk is a single step whose time replaces ``pace.step_s`` (a fresh
    measurement beats any remembered one); later chunks are half of what still fits and at most
    ``max_chunk_s`` long (at least one step), so a machine that slows down mid-window is
    noticed within a second. If even ``cfg.least_steps()`` cannot be reached in time the training is
    ``abandoned``: the caller skips the window rather than upload late.
    """
    stream: Iterator[Batch] = iter(batches)
    least = min(cfg.least_steps(), steps)
    done = tokens = 0
    loss_sum = seconds = 0.0
    stopped = ""
    while done < steps:
        left = seconds_left()
        chunk = 1  # the probe
        if left == math.inf:  # no deadline: everything in one call
            chunk = steps - done
        elif done > 0 and pace.step_s is not None:
            affordable = int(left // pace.step_s) if left > 0 else 0
            if affordable < 1 or (done < least and affordable < least - done):
                stopped = "deadline" if done >= least else "abandoned"
                break
            chunk = max(1, min(steps - done, affordable // 2, int(max_chunk_s // pace.step_s)))
        elif left <= 0:
            stopped = "deadline" if done >= least else "abandoned"
            break
        part = train(model, stream, cfg.model_copy(update={"steps": chunk}), optimizer)
        if done == 0 and part.steps:
            pace.step_s = part.seconds / part.steps  # fresh: replaces what was remembered
        else:
            pace.observe_steps(part.steps, part.seconds)
        done, tokens, seconds = done + part.steps, tokens + part.tokens, seconds + part.seconds
        loss_sum += part.mean_loss * part.steps if part.steps else 0.0
        if part.steps < chunk:
            stopped = "data"
            break
    mean = loss_sum / done if done else math.nan
    return PacedResult(InnerResult(tokens, done, mean, seconds), stopped)
