"""Typed settings for scoring and weight policy (part of the network-wide protocol config)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ScoringConfig(BaseModel):
    """How validators turn one window's evaluations into scores, and scores into weights.

    Every validator must use the same values: the model holder takes the median of their window
    scores, which only means something when they all score by the same rule.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    ema_alpha: float = Field(
        0.3,
        gt=0.0,
        le=1.0,
        description="weight of the new window in the moving score: new = (1-a)*old + a*score",
    )
    copy_overlap: float = Field(
        0.9,
        gt=0.0,
        le=1.0,
        description=(
            "index overlap |A&B|/min(|A|,|B|) at or above which two uploads (this window's, or "
            "one of the last history_windows') are checked for a copy; the own-data evidence, "
            "not upload order, decides which one is the copy"
        ),
    )
    copy_z: float = Field(
        1.0,
        ge=0.0,
        description=(
            "standard errors (of the difference of the two fits) by which an upload must fit "
            "the other upload's samples better than its own to be judged a copy: with no "
            "margin a noise flip flags a copier's victim now and then; a copy that escapes "
            "proves nothing on its own samples and is paid about nothing"
        ),
    )
    history_windows: int = Field(
        3,
        ge=0,
        le=64,
        description="past windows whose accepted uploads a validator keeps to catch replays",
    )
    proof_z: float = Field(
        2.0,
        ge=0.0,
        description=(
            "standard errors subtracted from the own-data excess gain before it is paid; a "
            "copier's chance excess is then worth almost nothing"
        ),
    )
    harm_tolerance: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description=(
            "an upload whose gain on random samples is below the window median loses credit "
            "linearly, reaching 0 at (1 - harm_tolerance) x median"
        ),
    )
    record_windows: int = Field(
        8,
        ge=0,
        le=64,
        description=(
            "windows of each miner's track record: the mean of its gain on random samples over "
            "the window median, across its last record_windows measured windows, must reach "
            "record_full for full credit; 0 turns the record off"
        ),
    )
    record_full: float = Field(
        0.95,
        gt=0.0,
        description="track-record mean gain ratio at or above which an upload keeps its credit",
    )
    record_floor: float = Field(
        0.88,
        ge=0.0,
        description=(
            "track-record mean gain ratio at or below which an upload earns nothing (linear "
            "between record_floor and record_full): a bias that lowers a miner's gain on unseen "
            "data window after window is paid for no longer than the record takes to fill"
        ),
    )
    heldout_samples: int = Field(
        0,
        ge=0,
        description=(
            "samples of the reported held-out set (scoring.draws) every upload is also measured "
            "on, drawn afresh each window and held to the harm check: harm aimed at the samples "
            "progress is reported on costs credit like harm to the train data; 0 (the default) "
            "turns it off: at 16 its noise cost honest miners pay in the measured runs"
        ),
    )
    min_improvement: float = Field(
        0.0,
        ge=0.0,
        description=(
            "relative loss drop on the assigned samples an update must exceed to score at all; "
            "a margin above evaluation noise"
        ),
    )
    unproven_credit: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description=(
            "credit for the part of the assigned-data gain that random data also shows, paid "
            "only to uploads whose own-data excess is proven (generic gain is what copies have)"
        ),
    )

    evaluations: int = Field(
        2,
        ge=0,
        le=256,
        description=(
            "uploads each validator evaluates a window (their losses before and after, on own "
            "and random samples), drawn by the beacon, validators taking different ones; the "
            "others are reported at their sender's moving score (standing). 0: every upload. "
            "Bounds a validator's scoring at any number of miners (subnet.scoring.sample)"
        ),
    )
    checks: int = Field(
        1,
        ge=0,
        le=8,
        description=(
            "uploads each validator checks a window (replays their training and compares, "
            "subnet.verify); 0 turns checks off. Validators check different uploads, so the share "
            "checked grows with the number of validators, not any one validator's cost"
        ),
    )
    classes: list[str] = Field(
        default_factory=list,
        max_length=32,
        description=(
            "replay classes this subnet accepts uploads from, as shell patterns over "
            "`platform/precision/software` (subnet.verify.classes), e.g. `cpu-avx2-*/fp32/*`; "
            "an upload in another class is refused (class_refused) and such a miner does not "
            "start. Empty: every class (one no validator covers is held in probation)"
        ),
    )
    check_share: float = Field(
        0.25,
        gt=0.0,
        le=1.0,
        description=(
            "most of a window's uploads that are checked (what miners send for checks stays a "
            "bounded multiple of their uploads); more validators than that check the same again"
        ),
    )
    check_chunks: float = Field(
        0.008,
        gt=0.0,
        le=1.0,
        description=(
            "share of the model's chunks a check reads (at least one): a checked miner sends "
            "these chunks of its error feedback before and after the window, with proofs"
        ),
    )
    check_tolerance: float = Field(
        2e-4,
        gt=0.0,
        le=1.0,
        description=(
            "relative L2 difference between the codec input a miner's answer implies and the "
            "replay's, above which a check fails (bench.py verify: a replay on the pinned "
            "kernels and the miner's threads and ranks, one process or 2 DDP or FSDP2 ranks, is "
            "exact, its error 4e-8 of rounding; a bias of 0.5 % of the update shows as 1e-3 or "
            "more on hypertrain-20m)"
        ),
    )
    check_margin: float = Field(
        0.0,
        ge=0.0,
        le=100.0,
        description=(
            "0 (the default): a check passes within check_tolerance alone. Above 0, a check "
            "beyond check_tolerance passes if within this many times the validator's own measure "
            "of the window's chaos: a second replay with every gradient perturbed by 1e-6 "
            "relative and its codec-input difference from the first. Since protocol v8 a replay "
            "is the miner's training bit for bit (the pinned kernels, the miner's threads), so "
            "the probe only serves miners whose replays are not exact (several ranks, other "
            "kernels), and in a chaotic window it lets a lie of that size through"
        ),
    )
    check_grace: int = Field(
        2,
        ge=1,
        le=8,
        description=(
            "windows an answer to a check, or the reveal of an upload named for one, may be owed "
            "(a storage outage) before its sender is banned at this validator "
            "(check_unanswered, check_unrevealed): a liar would otherwise withhold whatever a "
            "check would read"
        ),
    )
    pay_unverified: bool = Field(
        False,
        description=(
            "pay senders no check has passed yet; false (the default) scores them 0 until one "
            "does (their probation; they are checked first), so a fresh hotkey that lies from "
            "its first upload earns nothing and is never merged. Before a validator's first "
            "check passes it pays nobody, so a network's first window merges nothing"
        ),
    )

    @model_validator(mode="after")
    def _record_band(self) -> ScoringConfig:
        if self.record_floor >= self.record_full:
            raise ValueError(
                f"scoring.record_floor ({self.record_floor}) must be below scoring.record_full "
                f"({self.record_full})"
            )
        return self
