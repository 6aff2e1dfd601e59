"""What one validator knows of replay classes: its own, its senders', the other validators'.

A check is exact only inside a replay class (``subnet.verify.classes``), so a validator checks
only uploads of the classes it **covers**, and it says which in every check notice (``covers``).
From the notices it learns which classes the other validators cover, and from each sender's
uploads the class that sender trains in. What follows from that, for the checker:

- **The draw** (``subnet.verify.draw.targets``) runs over the senders whose class this validator
  covers (a sender not seen yet too: its first upload says), among the validators that cover
  what it covers: they share one shuffle of the same senders, as before classes.
- **A sender that changes class starts over** here: its verification (own checks and others'
  passes) is of its old class, so from the window of the change it is a newcomer again. A liar
  that was verified in a covered class gains nothing by lying in another: it is unpaid here
  until a check in the new class passes.
- **An upload of a class no validator covers** is never checked, never banned for that, and
  never paid as unverified (``scoring.pay_unverified`` pays only what some validator can
  check): it stays in probation, scored and shown, until a validator that covers its class
  joins. What an attacker gains by claiming such a class is 0 of weights and merge.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from loguru import logger

from ..verify.classes import ReplayClass, accepted


class ClassBook:
    """Replay classes as one validator sees them (the module doc)."""

    def __init__(self, covers: Sequence[ReplayClass | str] = ()) -> None:
        """``covers``: the classes this validator replays exactly, its fp32 class first."""
        self.covers: tuple[str, ...] = tuple(str(c) for c in covers)
        self.senders: dict[str, tuple[str, int]] = {}  # hotkey -> (its class, since window)
        self.validators: dict[str, tuple[str, ...]] = {}  # validator -> what its notice covers

    def of(self, stated: str | None) -> str:
        """An upload's class: what its metadata states, or (a sender that states none) this
        validator's own fp32 class, so that omitting it escapes no check."""
        return stated if stated else (self.covers[0] if self.covers else "")

    def observe(self, hotkey: str, stated: str | None, window: int) -> bool:
        """Note ``hotkey``'s class in ``window``; True when it changed from the one known (the
        caller forgets the sender's verification: it starts over in the new class)."""
        cls = self.of(stated)
        known = self.senders.get(hotkey)
        if known is not None and known[0] == cls:
            return False
        if known is not None and window < known[1]:
            return False  # an older upload, read late: the newer class stands
        self.senders[hotkey] = (cls, window)
        return known is not None

    def screen(self, window: int, got: Any, patterns: Sequence[str]) -> list[str]:
        """Refuse ``got``'s uploads of classes ``patterns`` do not accept (``scoring.classes``:
        moved from ``accepted`` to ``rejected`` as ``class_refused``); note the others'
        classes. The senders whose class changed (the caller forgets their verification)."""
        changed = []
        for hotkey, upload in list(got.accepted.items()):
            cls = self.of(upload.meta.replay_class)
            if not accepted(cls, patterns):
                del got.accepted[hotkey]
                got.rejected[hotkey] = "class_refused"
                logger.info("window {} {}: class {} is not accepted here", window, hotkey[:8], cls)
            elif self.observe(hotkey, upload.meta.replay_class, window):
                changed.append(hotkey)
                logger.info(
                    "window {} {}: now in class {}: unverified here until a check of it passes",
                    window,
                    hotkey[:8],
                    cls,
                )
        return changed

    def since(self, hotkey: str) -> int:
        """The first window of the sender's current class (-1: not seen)."""
        return self.senders.get(hotkey, ("", -1))[1]

    def mine(self, hotkey: str) -> bool:
        """Whether this validator checks ``hotkey``: its class is covered here (or not seen
        yet)."""
        known = self.senders.get(hotkey)
        return known is None or known[0] in self.covers

    def covered(self, cls: str) -> bool:
        """Whether this validator replays ``cls`` exactly."""
        return cls in self.covers

    def checkable(self, hotkey: str) -> bool:
        """Whether some validator, this one or one whose notice it read, covers the sender's
        class (not seen yet: yes)."""
        known = self.senders.get(hotkey)
        if known is None or known[0] in self.covers:
            return True
        return any(known[0] in covers for covers in self.validators.values())

    def learn(self, validator: str, covers: Iterable[str]) -> None:
        """What ``validator``'s latest notice says it covers (an empty list: it did not say)."""
        covers = tuple(covers)
        if covers:
            self.validators[validator] = covers

    def peers(self, validators: Sequence[str], me: str) -> list[str]:
        """The validators that cover what this one covers (one not heard from yet counted as
        covering the same): they draw from the same senders."""
        mine = set(self.covers)
        return [v for v in validators if v == me or set(self.validators.get(v, mine)) == mine]

    def state_dict(self) -> dict[str, Any]:
        """The senders' classes (the validators' coverage is read again from their notices)."""
        return {"senders": {hk: [c, w] for hk, (c, w) in self.senders.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` saved."""
        self.senders = {hk: (str(c), int(w)) for hk, (c, w) in state.get("senders", {}).items()}
