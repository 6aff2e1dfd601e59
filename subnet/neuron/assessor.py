"""The validator's measurement of a window's uploads: copy fingerprints, the sample it evaluates,
and the per-sample evaluation of each upload in it (``subnet.scoring``).

Every upload is screened as the intake validates it (``measure``): its copy fingerprint, from
its support, and its norm, read in the same parse of the payload. Fingerprints of this window and recent ones that
overlap are matches (``scoring.copies``); another miner's earlier upload is a replay outright,
while a match within this window, or with a miner's own earlier upload, needs the evidence of
both sides measured. The uploads evaluated are this validator's sample of those it may pay
(``scoring.sample``), the suspects of the consensus screen first, plus both sides of each match
within the budget (the rest are held). Each is measured as merged, on its sender's own samples
and random ones (``scoring.assess``). Judged copies never enter the fingerprint history.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..compression import Compressor, Payload
from ..data import TokenDataset
from ..scoring import (
    Evaluation,
    FingerprintLog,
    find_matches,
    judge_matches,
    overlap_summary,
    twins,
)
from ..scoring.assess import WindowProbe, assess_window
from ..scoring.consensus import against, cosines
from ..scoring.draws import corpus_batches, heldout_draw, heldout_size
from ..scoring.sample import evaluated, with_matched
from .answers import beacon, notice_lane
from .replica import Replica
from .runtime import Runtime
from .score_book import PayRules, ScoreBook
from .uploads import Decoded, Received, WindowUploads

Measured = tuple[Any, float]  # an upload's copy fingerprint (None: a dense codec) and its norm


@dataclass(frozen=True)
class Draws:
    """The random draws of an assessment: ``sample_ids(n, total)``, ``n`` random sample ids of
    the training split; ``subset(ids, n)``, ``n`` of a sender's own samples."""

    sample_ids: Callable[[int, int], list[int]]
    subset: Callable[[Sequence[int], int], list[int]]


class Assessor:
    """Screens and evaluates a window's uploads for one validator (the module doc)."""

    def __init__(
        self,
        rt: Runtime,
        lane: str,
        book: ScoreBook,
        pay: PayRules,
        assigned: Callable[[int], Callable[[str], list[int]]],
        draws: Draws,
    ) -> None:
        """``lane``: the gradient lane scored; ``assigned(window)``: each sender's sample ids."""
        self.rt = rt
        self.lane = lane
        self.book = book
        self.pay = pay
        self.assigned = assigned
        self.draws = draws
        # Fingerprints of recent windows' uploads (memory only): a replay of one is caught.
        self.fingerprints = FingerprintLog(rt.cfg.protocol.scoring.history_windows)

    def setup(self, data: TokenDataset, replica: Replica, compressor: Compressor) -> None:
        """The dataset, the model it measures against and the codec of the uploads."""
        self.data = data
        self.replica = replica
        self.compressor = compressor

    def measured(self, got: WindowUploads) -> dict[str, Measured]:
        """Each accepted upload's fingerprint and norm, read as it was validated (``measure``,
        handed to the intake: one parse of each payload)."""
        return {hk: upload.measured for hk, upload in got.accepted.items()}

    def measure(self, payload: Payload) -> Measured:
        """A payload's copy fingerprint (of its support, bounded whatever the upload's size;
        None for a dense codec) and its norm, in the parse that validates it: raises
        PayloadError for an invalid payload, ArithmeticError for a non-finite norm."""
        shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
        support, norm = self.compressor.measure(payload, shapes)
        support = self.fingerprints.of(support)
        if not math.isfinite(norm):
            raise ArithmeticError(f"an update of norm {norm}")
        return support, norm

    def assess(
        self, window: int, accepted: dict[str, Received], measured: Mapping[str, Measured]
    ) -> tuple[list[Evaluation], dict[str, str], set[str]]:
        """Per-sample evaluation of this validator's sample of the uploads (``scoring.sample``)
        and of both sides of every fingerprint match, the copies the own-data evidence names,
        and the matched uploads left over (held); ``measured``: each upload's support and norm
        (``measure``), for every upload."""
        p = self.rt.cfg.protocol
        own, match_ids = self._own_ids(window, accepted)
        deltas = Decoded(accepted)  # decoded on use: one dense update alive at a time
        # Copy fingerprints need sparsity: a dense codec (support None) sends every index.
        supports = {hk: measured[hk][0] for hk in accepted}
        prints = {} if any(v is None for v in supports.values()) else supports
        history = self.fingerprints.recent(window)
        matches = find_matches(window, prints, history, p.scoring)
        probe, random_ids, heldout = self._probe()
        # Measured as merged: clipped to the median norm of the miners this validator pays
        # (fresh hotkeys cannot pull it down), norms from the payloads, not decodes.
        norms = {hk: measured[hk][1] for hk in accepted}
        standing = self.book.standing()
        # Another miner's earlier upload is a replay outright (``judge_matches``): only the
        # pairs of this window and a miner's own earlier uploads need the evidence measured.
        judged = [m for m in matches if m.window == window or m.source == m.hotkey]
        sample, held, suspects = self._sample(window, accepted, deltas, norms, judged)
        judged = [m for m in judged if m.hotkey in sample]
        evaluations, fits = assess_window(
            probe,
            deltas,
            own,
            random_ids,
            judged,
            match_ids,
            heldout,
            norms,
            twins(matches, window),
            standing,
            sample,
        )
        evaluations = [replace(ev, fraction=accepted[ev.hotkey].fraction) for ev in evaluations]
        copies = judge_matches(matches, fits, p.scoring.copy_z, window)
        # A judged copy is kept out of the history: it would stand there under its copier's
        # hotkey, and a later upload of its original's sender that resembled the original would
        # then "match another miner's earlier upload".
        self.fingerprints.record(window, {hk: v for hk, v in prints.items() if hk not in copies})
        self.rt.metrics.log(
            "fingerprints",
            window=window,
            overlap=overlap_summary(prints, history),
            matches=[
                [m.hotkey, m.source, m.window, round(m.overlap, 4), *fits.get(m, ())]
                for m in matches
            ],
            evaluated=sorted(sample),
            held=sorted(held),
            against=suspects,
        )
        return evaluations, copies, held

    def _probe(self) -> tuple[WindowProbe, list[int], list[int]]:
        """The model the uploads are measured on, and the window's random and held-out sample
        ids (drawn afresh: a sender cannot know them in advance)."""
        p = self.rt.cfg.protocol
        probe = WindowProbe(
            self.replica.model,
            self.replica.state,
            lambda ids: corpus_batches(self.data, ids, p.inner.micro_batch),
        )
        random_ids = self.draws.sample_ids(p.eval_samples, self.data.split_samples("train"))
        heldout = heldout_draw(p.scoring.heldout_samples, heldout_size(self.data))
        return probe, random_ids, heldout

    def _own_ids(
        self, window: int, accepted: Mapping[str, Received]
    ) -> tuple[dict[str, list[int]], Callable[[Any], list[int]]]:
        """Each upload's own samples evaluated, and the own samples of a match's source (this
        window's, or its sender's in an earlier one)."""
        assigned, n = self.assigned(window), self.rt.cfg.protocol.eval_samples
        # A partial upload is evaluated on the prefix it trained (its receipt proves which).
        subset = self.draws.subset
        own = {hk: subset(assigned(hk)[: u.samples or None], n) for hk, u in accepted.items()}

        def match_ids(m: Any) -> list[int]:
            if m.window == window:
                return own[m.source]
            return subset(self.assigned(m.window)(m.source), n)

        return own, match_ids

    def _sample(
        self,
        window: int,
        accepted: Mapping[str, Received],
        deltas: Decoded,
        norms: Mapping[str, float],
        judged: Sequence[Any],
    ) -> tuple[set[str], set[str], list[str]]:
        """The uploads evaluated here, the matched ones held (no evaluations left), and the
        consensus screen's suspects (``scoring.consensus``)."""
        p = self.rt.cfg.protocol
        validators = self.rt.writers(notice_lane(self.rt) or self.lane)
        payable = self.pay.payable(accepted)
        suspects = against(cosines(deltas, norms)) if p.scoring.evaluations else []
        fresh = [hk for hk in accepted if self.book.fresh(hk)]
        draw = (beacon(self.rt, window), p.run, self.lane, window)
        budget = p.scoring.evaluations
        sample = evaluated(*draw, payable, fresh, validators, self.rt.hotkey, budget, suspects)
        pairs = [(m.hotkey, m.source) if m.window == window else (m.hotkey,) for m in judged]
        sample, held = with_matched(sample, pairs, budget)
        return sample, held, suspects
