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

from ..verify.classes import PINNED_PLATFORM, ReplayClass, accepted


class ClassBook:
    """Replay classes as one validator sees them (the module doc)."""

    def __init__(self, covers: Sequence[ReplayClass | str] = (), quorum: int = 2) -> None:
        """``covers``: the classes this validator replays exactly, its fp32 class first;
        ``quorum``: the other validators that must cover a class this one does not before
        its senders count as checkable (one validator's word is not enough)."""
        self.covers: tuple[str, ...] = tuple(str(c) for c in covers)
        self.quorum = quorum
        self.window = -1  # the last window screened
        self.senders: dict[str, tuple[str, int]] = {}  # hotkey -> (its class, since window)
        self.validators: dict[str, tuple[str, ...]] = {}  # validator -> what its notice covers

    def of(self, stated: str | None) -> str:
        """An upload's class: what its metadata states, or (a sender that states none) the
        pinned CPU class in fp32 on this validator's torch build."""
        if stated:
            return stated
        software = ReplayClass.parse(self.covers[0]).software if self.covers else "unknown"
        return f"{PINNED_PLATFORM}/fp32/{software}"

    def observe(self, hotkey: str, stated: str | None, window: int) -> bool:
        """Note ``hotkey``'s class in ``window``; True when it changed from the one known (the
        caller forgets the sender's verification: it starts over in the new class)."""
        cls = self.of(stated)
        known = self.senders.get(hotkey)
        if known is None:  # first seen: no change known (others' earlier passes count)
            self.senders[hotkey] = (cls, -1)
            return False
        if known[0] == cls or window < known[1]:
            return False  # the same class, or an older upload read late: the newer stands
        self.senders[hotkey] = (cls, window)
        return True

    def screen(self, window: int, got: Any, patterns: Sequence[str]) -> list[str]:
        """Refuse ``got``'s uploads of classes ``patterns`` do not accept (``scoring.classes``:
        moved from ``accepted`` to ``rejected`` as ``class_refused``); note the others'
        classes. The senders whose class changed (the caller forgets their verification)."""
        changed, self.window = [], max(self.window, window)
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
        """Whether the sender can be checked: its class is covered here or by ``quorum``
        validators whose notices this one read (one validator's ``covers`` alone could name a
        class nobody replays), and it has been in it since before this window's draw (a
        sender that changes class every window is drawn by its last class and never checked
        in its new one)."""
        known = self.senders.get(hotkey)
        if known is None:
            return True
        if known[1] >= 0 and known[1] >= self.window:
            return False
        covering = sum(known[0] in covers for covers in self.validators.values())
        return known[0] in self.covers or covering >= self.quorum

    def learn(self, validator: str, covers: Iterable[str]) -> None:
        """What ``validator``'s latest notice says it covers (an empty list: it did not say)."""
        covers = tuple(covers)
        if covers:
            self.validators[validator] = covers

    def peers(self, validators: Sequence[str], me: str) -> list[str]:
        """The validators that cover this one's fp32 class, its first (one not heard from yet
        counted as covering it): they draw from nearly the same senders, and share one shuffle
        of them. (Two CPU validators whose bf16 kernels differ cover different bf16 classes
        and still take different senders of their common fp32 class.)"""
        first = self.covers[0] if self.covers else ""
        return [v for v in validators if v == me or first in self.validators.get(v, (first,))]

    def state_dict(self) -> dict[str, Any]:
        """The senders' classes (the validators' coverage is read again from their notices)."""
        return {"senders": {hk: [c, w] for hk, (c, w) in self.senders.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` saved."""
        self.senders = {hk: (str(c), int(w)) for hk, (c, w) in state.get("senders", {}).items()}
