"""Windows sized from what a local run's work costs, measured while the run goes on.

A window is a fixed number of blocks (the protocol says so and every neuron agrees), but a local
run's chain is ours, and so is the length of its blocks. What a window's work costs changes
during a run: another program starts, three miners train at once, a storage call stalls. A
window length chosen once at the start fits only the machine as it was then.

The :class:`Pacemaker` reads every neuron's ``metrics.jsonl`` as it grows and keeps simnet's
block time long enough that each phase holds its work, with headroom:

* every step a neuron runs writes a ``step`` record (``BaseNeuron.timed``): it took ``s``
  seconds from offset ``o`` of a phase whose last offset is ``L``, so blocks must last at least
  ``headroom * s / (L - o)`` seconds (of the ``L - o + 1`` ticks, one is lost to polling);
* a miner trains fewer steps to fit a short window, so its training time says nothing about its
  need: from its ``train`` and ``upload`` records, ``sync + H x step + compress and upload``
  must fit in ``upload_deadline - 1`` blocks (a ``window_skipped`` record: ``H x step``).

Each source (a neuron's step, a miner's window) counts with the lower median of its last three
needs (its first one alone counts at once), so one stalled call does not stretch the run and a
load that lasts does. The block time follows the largest of the sources active in the last two
windows: it lengthens at once and shortens by at most 15 % a window, never below the block time
the run started with nor above ``max_factor`` times it. Every change is a log line with whose
work set it and the numbers, and a record in ``pacemaker.jsonl`` in the run folder. The rules
are pure functions; the class is the shell that reads files and calls simnet.

A phase of one or two ticks cannot be paced this way: a step that must end within the tick it
starts in needs blocks longer than the step itself. Local runs give every step a few ticks
(``calibrate.py`` does for the demo).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from ..chain.simnet.substrate import post
from ..config import WindowConfig
from ..training.config import InnerConfig
from .stack import Endpoints

# At most this much shorter per window: a miner's estimate of the block time lags a change by
# up to 16 blocks, and the 10 % margin it keeps must cover the difference.
SHRINK = 0.85


@dataclass(frozen=True)
class Need:
    """One measured piece of work and the block time it needs."""

    source: str  # "validator1 score", "miner2 window"
    window: int
    block_s: float  # the block time this work needs, headroom included
    detail: str  # the numbers, for the log


def step_need(
    name: str, record: dict[str, Any], headroom: float, last: int | None = None
) -> Need | None:
    """The block time a ``step`` record's work needs (None for a record without timing);
    ``last`` replaces the record's last offset (a reveal is due by ``reveal_by``, not by the
    end of its phase)."""
    try:
        seconds, offset, window = (
            float(record["seconds"]),
            int(record["offset"]),
            int(record["window"]),
        )
        last = int(record["last_offset"]) if last is None else last
    except (KeyError, TypeError, ValueError):
        return None
    action = record.get("action")
    detail = f"{action} took {seconds:.1f} s from offset {offset}, due by offset {last}"
    return Need(f"{name} {action}", window, headroom * seconds / max(1, last - offset), detail)


def miner_need(
    name: str,
    train: dict[str, Any],
    upload: dict[str, Any] | None,
    upload_deadline: int,
    headroom: float,
) -> Need | None:
    """The block time a miner's whole window of ``H`` steps needs (see the module doc)."""
    try:
        steps, assigned = int(train["steps"]), int(train["steps_assigned"])
        step_s = float(train["seconds"]) / steps
        window = int(train["window"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    sync = float(train.get("sync_seconds") or 0.0)
    tail = float((upload or {}).get("upload_seconds") or 0.0)
    need = sync + assigned * step_s + tail
    detail = (
        f"{assigned} steps of {step_s:.2f} s, sync {sync:.1f} s and upload {tail:.1f} s "
        f"= {need:.1f} s (upload phase {upload_deadline} blocks)"
    )
    return Need(f"{name} window", window, headroom * need / max(1, upload_deadline - 1), detail)


def skipped_need(
    name: str, record: dict[str, Any], steps: int, upload_deadline: int, headroom: float
) -> Need | None:
    """A ``window_skipped`` record: ``H`` steps at the step time it measured."""
    try:
        step_s, window = float(record["step_seconds"]), int(record["window"])
    except (KeyError, TypeError, ValueError):
        return None
    detail = f"skipped: {steps} steps of {step_s:.2f} s (upload phase {upload_deadline} blocks)"
    return Need(
        f"{name} window", window, headroom * steps * step_s / max(1, upload_deadline - 1), detail
    )


def typical(needs: deque[Need]) -> Need:
    """One source's need over its last windows: the lower median, so one stalled call (a fault,
    a page-in) does not stretch the run while a load that lasts does, from its first window."""
    ordered = sorted(needs, key=lambda n: n.block_s)
    return ordered[(len(ordered) - 1) // 2]


def next_block_time(
    current: float, base: float, need: float, new_window: bool, max_factor: float
) -> float:
    """Lengthen to ``need`` at once; shorten (once a window) by at most ``SHRINK``; stay within
    ``[base, max_factor x base]``."""
    target = max(base, min(need, max_factor * base))
    if target >= current:
        return target
    return max(target, current * SHRINK) if new_window else current


class SimnetBlockTime:
    """Sets a local simnet's block time (again at every poll: a restarted chain forgets it)."""

    def __init__(self, url: str) -> None:
        self.url = "http://" + url.removeprefix("sim://").removeprefix("http://")

    def __call__(self, seconds: float) -> None:
        """Make simnet's block time ``seconds``; best effort."""
        try:
            if abs(float(post(self.url, "info", {})["block_time"]) - seconds) > 1e-6:
                post(self.url, "admin_set_block_time", {"seconds": seconds})
        except Exception as error:  # noqa: BLE001 - down (restarting): set again next poll
            logger.debug("pacemaker: simnet not reachable now: {}", error)


class Pacemaker:
    """Keeps a local run's block time fitted to its measured work (see the module doc)."""

    def __init__(
        self,
        root: str | Path,
        target: str | Callable[[float], None],
        *,
        base_block_s: float,
        window: WindowConfig,
        inner_steps: int,
        names: dict[str, str] | None = None,
        headroom: float = 1.5,
        max_factor: float = 4.0,
        poll_s: float = 2.0,
        unit: str = "blocks",
    ) -> None:
        """``target`` carries the block time out: simnet's address (``sim://host:port`` or
        ``http://host:port``), or a callable given the wanted seconds at every poll (a room's
        :class:`~subnet.room.pace.RoomPace`; ``unit`` then names its ticks)."""
        self.root = Path(root)
        self.apply = SimnetBlockTime(target) if isinstance(target, str) else target
        self.unit = unit
        self.base = self.block_s = base_block_s
        self.upload_deadline, self.inner_steps = window.upload_deadline, inner_steps
        self.reveal_last = window.reveal_by - 1  # validators score without a later reveal
        self.names = names or {}  # state folder's hotkey prefix -> a readable name
        self.headroom, self.max_factor, self.poll_s = headroom, max_factor, poll_s
        self.needs: dict[str, deque[Need]] = defaultdict(lambda: deque(maxlen=3))
        self._offsets: dict[Path, int] = {}
        self._miner: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
        self._window = -1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_stack(
        cls, root: str | Path, endpoints: Endpoints, protocol: dict[str, Any], block_s: float
    ) -> Pacemaker:
        """The pacemaker of a local stack's run with these ``[protocol]`` settings (its
        ``window`` and ``inner`` tables; the defaults where absent) and starting block time."""
        window = WindowConfig.model_validate(protocol.get("window", {}))
        steps = InnerConfig.model_validate(protocol.get("inner", {})).steps
        names = {w.hotkey: w.name for w in endpoints.wallets}
        return cls(
            root,
            endpoints.network,
            base_block_s=block_s,
            window=window,
            inner_steps=steps,
            names=names,
        )

    def __enter__(self) -> Pacemaker:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        """Poll in a background thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._loop, name="pacemaker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling (the chain keeps its last block time)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except Exception as error:  # noqa: BLE001 - a bad poll must not end the run
                logger.warning("pacemaker: poll failed: {}", error)

    def poll(self) -> float:
        """Read what the neurons wrote since the last poll; set the block time; return it."""
        new_window = False
        for name, role, record in self._new_records():
            need = self.need(name, role, record)
            if need is None:
                continue
            self.needs[need.source].append(need)
            if need.window > self._window:
                new_window, self._window = self._window >= 0, need.window
        recent = [typical(q) for q in self.needs.values() if q[-1].window >= self._window - 1]
        worst = max(recent, key=lambda n: n.block_s, default=None)
        wanted = next_block_time(
            self.block_s, self.base, worst.block_s if worst else 0.0, new_window, self.max_factor
        )
        if not math.isclose(wanted, self.block_s, rel_tol=0.02):
            self._announce(wanted, worst)
            self.block_s = wanted
        self.apply(self.block_s)
        return self.block_s

    def _announce(self, wanted: float, worst: Need | None) -> None:
        verb = "stretched" if wanted > self.block_s else "shortened"
        why = f"{worst.source}: {worst.detail}, x{self.headroom} headroom" if worst else "idle"
        logger.info(
            "pacemaker: {} {} from {:.2f} s to {:.2f} s ({})",
            self.unit,
            verb,
            self.block_s,
            wanted,
            why,
        )
        record = {
            "time": time.time(),
            "window": self._window,
            "block_s": round(wanted, 3),
            "was": round(self.block_s, 3),
            "source": worst.source if worst else None,
            "detail": worst.detail if worst else None,
        }
        with open(self.root / "pacemaker.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")

    def need(self, name: str, role: str, record: dict[str, Any]) -> Need | None:
        """What one metrics record of neuron ``name`` (a ``role``) says the run needs, if
        anything (a miner's train and upload records count once both are in)."""
        event, window = record.get("event"), record.get("window")
        if event == "step":
            if role == "miner" and record.get("phase") == "upload":
                return None  # paced to the time there was: its need comes from train + upload
            last = self.reveal_last if record.get("phase") == "reveal" else None
            return step_need(name, record, self.headroom, last)
        if event in ("train", "upload") and isinstance(window, int):
            pair = self._miner.setdefault((name, window), {})
            pair[event] = record  # a commit-reveal miner logs its upload before its train
            if "train" not in pair or "upload" not in pair:
                return None
            del self._miner[(name, window)]
            return miner_need(
                name, pair["train"], pair["upload"], self.upload_deadline, self.headroom
            )
        if event == "window_skipped":
            return skipped_need(name, record, self.inner_steps, self.upload_deadline, self.headroom)
        return None

    def _new_records(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(name, role, record) for every complete line a neuron wrote since the last poll."""
        out = []
        for path in sorted((self.root / "state").glob("*/metrics.jsonl")):
            role, name = path.parent.name.partition("-")[0], self._name(path.parent.name)
            start = self._offsets.get(path, 0)
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read()
            end = data.rfind(b"\n") + 1  # a half-written last line waits for the next poll
            self._offsets[path] = start + end
            for line in data[:end].splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    out.append((name, role, record))
        return out

    def _name(self, folder: str) -> str:
        hotkey = folder.partition("-")[2]
        return next((n for hk, n in self.names.items() if hk.startswith(hotkey)), folder)


def wait_windows(
    done: Callable[[], bool],
    block: Callable[[], int],
    windows: float,
    blocks_per_window: int,
    what: str,
    check: Callable[[], None] | None = None,
    poll_s: float = 0.5,
) -> None:
    """Until ``done()``, for at most ``windows`` windows of the chain's clock (a paced run's
    windows last as long as its work needs, so a deadline in seconds would not fit every
    machine); ``check()`` raises if the run broke meanwhile. TimeoutError says what it waited
    for. A chain that does not answer (restarting) is asked again at the next poll."""
    deadline: int | None = None
    while not done():
        if check is not None:
            check()
        try:
            head = block()
        except Exception as error:  # noqa: BLE001 - the chain may be restarting
            logger.debug("waiting for {}: chain unreadable: {}", what, error)
            head = None
        if head is not None:
            deadline = (
                head + math.ceil(windows * blocks_per_window) if deadline is None else deadline
            )
            if head >= deadline:
                raise TimeoutError(f"timed out waiting {windows:g} windows for {what}")
        time.sleep(poll_s)
