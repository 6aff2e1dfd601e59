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

    audit_fraction: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description=(
            "share of each window's uploads a public beacon drawn after the upload deadline "
            "selects for audit: every validator replays their training from the committed "
            "state, and a sender whose update the replay does not give is banned "
            "(scoring.audit); 0 turns audits off"
        ),
    )
    audit_tolerance: float = Field(
        0.05,
        gt=0.0,
        le=1.0,
        description=(
            "relative L2 difference between a replay and the miner's update above which the "
            "audit fails; honest replays on one machine differ by 0 (bench.py audit)"
        ),
    )
    audit_state_tolerance: float = Field(
        0.01,
        gt=0.0,
        le=1.0,
        description=(
            "the same for each part of the new training state (error feedback, moments), which "
            "replays give far more exactly than the 2-bit update, and whose error feedback is "
            "several times the update's norm: a bias hidden there must stay this small"
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
