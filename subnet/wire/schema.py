"""One schema per signed message: what each kind of envelope's metadata may say.

An envelope's metadata is a flat map of strings (safetensors metadata), written by a peer who
may be an attacker. Each kind of object has one schema here (``SCHEMAS``), a frozen pydantic
model with ``extra="forbid"`` whose fields parse their wire strings totally
(``subnet.wire.fields``). The envelope reader parses the metadata once, where the envelope is
accepted (``verify_envelope`` -> ``Envelope.meta``); roles read typed, bounded, finite fields,
never the strings. A value that does not parse refuses the whole envelope with the reason code
of its field (``Rejected``), at its sender's cost. Writers build the same models and sign
``wire()``, so what they send parses back to what they meant.

The plan digest is not metadata: it travels in the signed header (``Header.plan``), checked by
the envelope reader like the run and the window.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from subnet.storage.keys import ObjectKind
from subnet.wire import fields as f
from subnet.wire.reasons import Reason, Rejected
from subnet.wire.replay_class import MAX_CLASS_CHARS, ReplayClass

MAX_REPORT_CHARS = 256 * 1024  # 4,096 entries of ~60 characters fit with room to spare
MAX_DIGESTS_CHARS = 512 * 1024  # 4,096 entries of ~120 characters (hotkey and sha256 hex)
MAX_GRANT_CHARS = 256 * 1024
MAX_UNITS = 4096  # data units granted to one member for one round
MAX_UNIT = 2**40  # a unit index (units of one inner step's samples)
MAX_ABS_SCORE = 1e9  # scores are loss improvements, O(1); beyond this a report is nonsense
MAX_LOSS = 1e6  # a cross-entropy loss is >= 0 and O(10)
MAX_MEMBERS = 1 << 20  # members a tree partial covers
# CPU threads a miner may say it trained with: a validator replays with as many, so this bounds
# what a check costs one with fewer cores (hypertrain-20m on 2 cores: 16 threads 1.20x, 256 3.7x)
MAX_THREADS = 16
MAX_COVERS = 8  # replay classes one validator says it checks
MAX_RANKS = 64  # training ranks a miner may say it used (a validator's replay computes each one)
MAX_MANIFEST_CHARS = 256 * 1024  # a model manifest's JSON (``subnet.versions.manifest``)

M = TypeVar("M", bound="Message")


class Message(BaseModel):
    """A signed message's metadata. Subclasses name the reason each field is refused with."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    # The reason for a field that fails without a reason of its own (missing, unknown, badly
    # typed), and for an unknown key.
    REFUSAL: ClassVar[Reason] = Reason.BAD_METADATA
    FIELD_REASONS: ClassVar[Mapping[str, Reason]] = {}

    @classmethod
    def parse(cls: type[M], metadata: Mapping[str, str], *, window: int | None = None) -> M:
        """The typed message, or ``Rejected`` with the first failing field's reason.

        ``window`` is the envelope header's window, for fields that name an earlier one."""
        try:
            return cls.model_validate(dict(metadata), context={"window": window})
        except ValidationError as exc:
            error = exc.errors()[0]
            kind, where = error["type"], ".".join(str(p) for p in error["loc"]) or cls.__name__
            if kind.startswith(f.ERROR_PREFIX):
                reason = Reason(kind.removeprefix(f.ERROR_PREFIX))
            else:
                name = str(error["loc"][0]) if error["loc"] else ""
                reason = cls.FIELD_REASONS.get(name, cls.REFUSAL)
            raise Rejected(reason, f"{where}: {error['msg']}"[:200]) from None

    def wire(self) -> dict[str, str]:
        """The metadata to sign: every field set, as its wire string."""
        return {k: v for k, v in self.model_dump(exclude_none=True).items()}


# -- gradients --------------------------------------------------------------------------------


def _count(value: object) -> int:
    return f.count(Reason.BAD_METADATA, value)


def _members(value: object) -> int:
    return f.count(Reason.BAD_METADATA, value, low=1, high=MAX_MEMBERS)


def _threads(value: object) -> int:
    return f.count(Reason.BAD_METADATA, value, low=1, high=MAX_THREADS)


def _ranks(value: object) -> int:
    return f.count(Reason.BAD_METADATA, value, low=1, high=MAX_RANKS)


def _replay_class(value: object) -> str:
    try:
        return str(ReplayClass.parse(value))
    except ValueError as error:
        raise f.FieldError(Reason.BAD_METADATA, str(error)) from None


def _loss(value: object) -> float:
    return f.decimal(Reason.BAD_METADATA, value, low=0.0, high=MAX_LOSS)


def _loss_text(value: float) -> str:
    return f"{value:.6f}"


def _receipt(value: object) -> str:
    return f.hex64(Reason.BAD_RECEIPT, value)


def _state_digest(value: object) -> str:
    return value if value == f.FRESH else f.hex64(Reason.CHECK_MALFORMED, value)


def _state_from(value: object) -> int | None:
    if value == "" or value is None:
        return None
    return f.count(Reason.CHECK_MALFORMED, value)


def _window_text(value: int | None) -> str:
    return "" if value is None else str(value)


DIGITS = "1-12 ASCII digits"
HEX = "64 lowercase hex characters"
Count = f.field(_count, int, f"{DIGITS}: 0 .. 10^12 - 1")
Members = f.field(_members, int, f"{DIGITS}: 1 .. {MAX_MEMBERS:,}, capped by the subtree's size")
Threads = f.field(_threads, int, f"{DIGITS}: 1 .. {MAX_THREADS}")
Ranks = f.field(_ranks, int, f"{DIGITS}: 1 .. {MAX_RANKS}")
Class = f.field(
    _replay_class,
    str,
    f"`platform/fp32|bf16/software`, at most {MAX_CLASS_CHARS} characters (subnet.verify.classes)",
)
Loss = f.field(_loss, float, "an ASCII decimal, finite (no NaN, inf, 1e400): 0 .. 10^6", _loss_text)
Receipt = f.field(_receipt, str, f"{HEX} (sha256 of the sample ids)")
StateDigest = f.field(_state_digest, str, f"`fresh`, or {HEX} (a Merkle root of error feedback)")
StateFrom = f.field(
    _state_from, int | None, f"empty when fresh, else {DIGITS} < the header's window", _window_text
)
_MAP_REASONS = (
    Reason.NOT_TEXT,
    Reason.TOO_LONG,
    Reason.NOT_JSON,
    Reason.TOO_DEEP,
    Reason.NOT_AN_OBJECT,
    Reason.TOO_MANY_ENTRIES,
    Reason.DUPLICATE_KEY,
    Reason.BAD_KEY,
)


class GradientMeta(Message):
    """A gradient upload's metadata (also a tree partial's, and a gossip worker's model's).

    Every field is optional so that the one schema serves the miner's upload, a tree partial
    and a holder's checkpoint (which carries none); readers refuse what they need and lack
    (``subnet.neuron.uploads``: a missing receipt is ``bad_receipt``).
    """

    FIELD_REASONS: ClassVar[Mapping[str, Reason]] = {
        "receipt": Reason.BAD_RECEIPT,
        "state_in": Reason.CHECK_MALFORMED,
        "state_from": Reason.CHECK_MALFORMED,
        "state_out": Reason.CHECK_MALFORMED,
    }

    receipt: Receipt | None = None  # sha256 of the sample ids trained, in order
    samples: Count | None = (
        None  # samples trained (a whole-step prefix); None: the whole assignment
    )
    steps: Count | None = None  # inner steps taken (informational; readers derive it from samples)
    tokens: Count = 0  # tokens trained, as the sender says: informational, never a weight
    loss: Loss | None = None  # mean inner loss, finite, >= 0
    # CPU threads per rank it trained with: a validator's replay uses as many, so that its
    # reductions split as the miner's did and the replay is bit for bit (docs/protocol.md)
    threads: Threads | None = None
    ranks: Ranks | None = None  # training ranks (DDP): the replay computes each one's gradient
    # the replay class it trained in (``subnet.verify.classes``): only a validator that covers it
    # checks the upload; absent, the pinned CPU class in fp32
    replay_class: Class | None = None
    # the root of the error feedback trained from (``fresh``: all zero; ``subnet.verify.chunks``)
    state_in: StateDigest | None = None
    # the earlier window whose ``state_out`` ``state_in`` is (written "" when fresh)
    state_from: StateFrom = None
    state_out: StateDigest | None = None  # the root of the error feedback this window leaves
    members: Members | None = None  # a tree partial: the subtree members it covers
    subtree_samples: Count | None = None  # a tree partial: samples its subtree trained

    @model_validator(mode="after")
    def _states_agree(self, info: ValidationInfo) -> GradientMeta:
        """The three error-feedback fields travel together; ``state_from`` names an earlier
        window exactly when ``state_in`` is not fresh."""
        states = (self.state_in, self.state_out)
        if states == (None, None):
            if self.state_from is not None:
                raise _refuse(Reason.CHECK_MALFORMED, "state_from without state_in")
            return self
        if None in states:
            raise _refuse(Reason.CHECK_MALFORMED, "state_in and state_out travel together")
        if (self.state_in == f.FRESH) != (self.state_from is None):
            raise _refuse(Reason.CHECK_MALFORMED, "state_from is set exactly when not fresh")
        window = (info.context or {}).get("window")
        if self.state_from is not None and window is not None and self.state_from >= window:
            raise _refuse(Reason.CHECK_MALFORMED, f"state_from {self.state_from} is not before")
        return self

    def wire(self) -> dict[str, str]:
        """As signed; ``state_from`` is written (empty) whenever the states are."""
        out = super().wire()
        if self.state_in is not None:
            out["state_from"] = _window_text(self.state_from)
        return out


def _refuse(reason: Reason, detail: str) -> PydanticCustomError:
    """A model-level refusal with ``reason`` (raised from a model validator)."""
    return PydanticCustomError(f.ERROR_PREFIX + reason.value, detail)


class CommitMeta(Message):
    """A commit: the digest of the gradient envelope its sender will reveal."""

    REFUSAL: ClassVar[Reason] = Reason.MALFORMED_PAYLOAD  # "a commit without a digest"

    commit: f.field(lambda v: f.hex64(Reason.MALFORMED_PAYLOAD, v), str, HEX)  # commit_digest


# -- score reports and weights ----------------------------------------------------------------


def score_map(text: object) -> dict[str, float]:
    """``{miner hotkey: score}`` from a report's JSON text; ``FieldError`` with the reason."""
    out: dict[str, float] = {}
    for key, value in f.hotkey_map(text, MAX_REPORT_CHARS, Reason.BAD_SCORE):
        if type(value) not in (int, float) or not math.isfinite(value):
            raise f.FieldError(Reason.BAD_SCORE, f"{key[:8]}: {type(value).__name__}")
        if abs(value) > MAX_ABS_SCORE:
            raise f.FieldError(Reason.BAD_SCORE, f"{key[:8]}: |{value:.3g}| > {MAX_ABS_SCORE:g}")
        out[key] = float(value)
    return out


def digest_map(text: object) -> dict[str, str]:
    """``{miner hotkey: payload sha256}`` from a report's ``digests`` text."""
    out: dict[str, str] = {}
    for key, value in f.hotkey_map(text, MAX_DIGESTS_CHARS, Reason.BAD_DIGEST):
        out[key] = f.hex64(Reason.BAD_DIGEST, value) if isinstance(value, str) else _no_digest(key)
    return out


def _no_digest(key: str) -> str:
    raise f.FieldError(Reason.BAD_DIGEST, key[:8])


_OBJECT = "a JSON object of at most 4,096 ss58 hotkeys (checksum verified)"
ScoreMap = f.json_field(
    score_map,
    dict[str, float],
    f"{_OBJECT}, 256 KiB: each a finite number, abs <= 10^9",
    (*_MAP_REASONS, Reason.BAD_SCORE),
)
DigestMap = f.json_field(
    digest_map,
    dict[str, str],
    f"{_OBJECT}, 512 KiB: each {HEX}",
    (*_MAP_REASONS, Reason.BAD_DIGEST),
)


class ScoreReportMeta(Message):
    """A validator's report: each miner's window score, and the payload digest it scored."""

    FIELD_REASONS: ClassVar[Mapping[str, Reason]] = {
        "scores": Reason.BAD_SCORE,
        "digests": Reason.BAD_DIGEST,
    }

    scores: ScoreMap
    digests: DigestMap


class WeightsMeta(Message):
    """A weight vector for a consensus slot: the consensus holder's ``scores`` (read like a
    report, with no digests), or a scorer's ``weights`` (``subnet.weights.SignedWeights``)."""

    FIELD_REASONS: ClassVar[Mapping[str, Reason]] = {
        "scores": Reason.BAD_SCORE,
        "weights": Reason.BAD_SCORE,
    }

    scores: ScoreMap | None = None
    weights: ScoreMap | None = None

    @model_validator(mode="after")
    def _one(self) -> WeightsMeta:
        if (self.scores is None) == (self.weights is None):
            raise _refuse(Reason.BAD_SCORE, "exactly one of scores and weights")
        return self


# -- grants and the final marker --------------------------------------------------------------


def grant_map(text: object) -> dict[str, tuple[int, ...]]:
    """``{hotkey: (unit, ...)}`` of a data grant; refused whole if any entry is malformed."""
    out: dict[str, tuple[int, ...]] = {}
    try:
        pairs = f.hotkey_map(text, MAX_GRANT_CHARS, Reason.BAD_GRANT)
    except f.FieldError as error:
        raise f.FieldError(Reason.BAD_GRANT, f"{error.reason.value}: {error.detail}") from None
    for key, units in pairs:
        if not isinstance(units, list) or len(units) > MAX_UNITS:
            raise f.FieldError(Reason.BAD_GRANT, f"{key[:8]}: not a list of at most {MAX_UNITS}")
        if not all(type(u) is int and 0 <= u < MAX_UNIT for u in units):
            raise f.FieldError(Reason.BAD_GRANT, f"{key[:8]}: a unit that is not an index")
        out[key] = tuple(units)
    return out


class GrantMeta(Message):
    """A lead's grant of data units for one round."""

    REFUSAL: ClassVar[Reason] = Reason.BAD_GRANT

    grants: f.json_field(
        grant_map,
        dict[str, tuple[int, ...]],
        f"{_OBJECT}, 256 KiB: each a list of at most {MAX_UNITS:,} unit indices in [0, 2^40)",
    )


class FinalMark(BaseModel):
    """What a final marker says: the last window, and the decider's held-out loss."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    window: int
    loss: float


def final_mark(text: object) -> FinalMark:
    """``{"window": int, "loss": float}`` of a final marker."""
    try:
        raw = f.load_json(text, 1024, Reason.BAD_FINAL)
    except f.FieldError as error:
        raise f.FieldError(Reason.BAD_FINAL, f"{error.reason.value}: {error.detail}") from None
    if not isinstance(raw, f.Pairs) or sorted(k for k, _ in raw) != ["loss", "window"]:
        raise f.FieldError(Reason.BAD_FINAL, "a final marker is {window, loss}")
    mark = dict(raw)
    if type(mark["window"]) is not int:
        raise f.FieldError(Reason.BAD_FINAL, "window is not an integer")
    window = f.count(Reason.BAD_FINAL, mark["window"])
    loss = mark["loss"]
    if type(loss) not in (int, float) or not 0 <= loss <= MAX_LOSS:
        raise f.FieldError(Reason.BAD_FINAL, "loss is not a finite number within bounds")
    return FinalMark(window=window, loss=float(loss))


class FinalMeta(Message):
    """The deciding member's word that the run stops after a window."""

    REFUSAL: ClassVar[Reason] = Reason.BAD_FINAL

    final: f.json_field(
        final_mark,
        FinalMark,
        'JSON `{"window": integer >= 0, "loss": finite number in [0, 10^6]}`',
        wire=lambda m: f.dumps(m.model_dump()),
    )


# -- checks of training ----------------------------------------------------------------------

MAX_TARGETS = 8  # senders one notice names
MAX_VERDICTS = 32  # verdicts one notice carries
_WINDOW = re.compile(r"[0-9]{1,12}")
_ERROR = re.compile(r"[0-9]{1,12}(\.[0-9]{1,12})?(e[-+]?[0-9]{1,3})?")
MAX_CHECK_ERROR = 1e9  # a verdict's error as written (a failure without one, inf, is written so)
PASS = "pass"
RESULTS = frozenset(
    {PASS} | {r.value for r in Reason if r.value.startswith("check_")} - {"check_banned"}
)


@dataclass(frozen=True)
class CheckVerdict:
    """How one check came out: ``result`` is ``pass`` or the failure's reason code."""

    window: int
    hotkey: str
    result: str
    error: float

    @property
    def ok(self) -> bool:
        """Whether the upload passed."""
        return self.result == PASS


def _targets_wire(targets: tuple[str, ...]) -> str:
    return ",".join(targets)


def _verdicts_wire(verdicts: tuple[CheckVerdict, ...]) -> str:
    return ";".join(
        f"{v.window},{v.hotkey},{v.result},{min(v.error, MAX_CHECK_ERROR):.6g}" for v in verdicts
    )


def _covers_wire(covers: tuple[str, ...]) -> str:
    return ",".join(covers)


def _covers(value: object) -> tuple[str, ...]:
    text = value if isinstance(value, str) else _covers_wire(tuple(value))  # type: ignore[arg-type]
    entries = tuple(text.split(",")) if text else ()
    if len(entries) > MAX_COVERS or len(set(entries)) != len(entries):
        raise f.FieldError(Reason.CHECK_BAD_NOTICE, f"covers: not {MAX_COVERS} classes or fewer")
    try:
        return tuple(str(ReplayClass.parse(e)) for e in entries)
    except ValueError as error:
        raise f.FieldError(Reason.CHECK_BAD_NOTICE, f"covers: {error}") from None


def _targets(value: object) -> tuple[str, ...]:
    text = value if isinstance(value, str) else _targets_wire(tuple(value))  # type: ignore[arg-type]
    targets = tuple(t for t in text.split(",") if t) if text else ()
    if len(targets) > MAX_TARGETS or not all(f.is_ss58(t) for t in targets):
        raise f.FieldError(Reason.CHECK_BAD_NOTICE, f"targets: not {MAX_TARGETS} hotkeys or fewer")
    if len(set(targets)) != len(targets):
        raise f.FieldError(Reason.CHECK_BAD_NOTICE, "targets: a hotkey named twice")
    return targets


def _verdicts(value: object) -> tuple[CheckVerdict, ...]:
    text = value if isinstance(value, str) else _verdicts_wire(tuple(value))  # type: ignore[arg-type]
    entries = text.split(";") if text else []
    if len(entries) > MAX_VERDICTS:
        raise f.FieldError(Reason.CHECK_BAD_NOTICE, f"more than {MAX_VERDICTS} verdicts")
    out = []
    for entry in entries:
        parts = entry.split(",")
        if len(parts) != 4:
            raise f.FieldError(Reason.CHECK_BAD_NOTICE, f"{entry[:80]!r}: not 4 fields")
        window, hotkey, result, error = parts
        if not (_WINDOW.fullmatch(window) and f.is_ss58(hotkey) and result in RESULTS):
            raise f.FieldError(Reason.CHECK_BAD_NOTICE, f"{entry[:80]!r}: a field does not parse")
        if not _ERROR.fullmatch(error) or not float(error) <= MAX_CHECK_ERROR:
            raise f.FieldError(Reason.CHECK_BAD_NOTICE, f"{entry[:80]!r}: error not in [0, 1e9]")
        out.append(CheckVerdict(int(window), hotkey, result, float(error)))
    if len({(v.window, v.hotkey) for v in out}) != len(out):
        raise f.FieldError(Reason.CHECK_BAD_NOTICE, "two verdicts on one upload")
    return tuple(out)


class CheckNotice(Message):
    """A validator's check notice for a window: whose uploads it checks (the senders then write
    their answers) and how the checks it finished since its last notice came out."""

    REFUSAL: ClassVar[Reason] = Reason.CHECK_BAD_NOTICE

    targets: f.field(
        _targets,
        tuple[str, ...],
        f"comma-separated ss58 hotkeys (checksum verified), at most {MAX_TARGETS}",
        _targets_wire,
    ) = ()
    verdicts: f.field(
        _verdicts,
        tuple[CheckVerdict, ...],
        f"at most {MAX_VERDICTS} `window,hotkey,result,error` joined by `;`: result `pass` or a"
        " `check_` code, error an ASCII decimal in [0, 10^9] (a larger one, inf included, written as 1e+09)",
        _verdicts_wire,
    ) = ()
    # the replay classes this validator checks (``subnet.verify.classes``); none: the pinned CPU
    # class in fp32
    covers: f.field(
        _covers,
        tuple[str, ...],
        f"at most {MAX_COVERS} replay classes joined by `,`",
        _covers_wire,
    ) = ()

    def refuse_outside(self, window: int, grace: int) -> None:
        """``Rejected(check_bad_notice)`` unless every verdict names a window the notice's
        validator could have checked by ``window`` (``verdict_windows``): a verdict of a later
        window would vouch for a sender ahead of any check, one far back for an upload no
        validator holds any more."""
        low, high = verdict_windows(window, grace)
        for v in self.verdicts:
            if not low <= v.window <= high:
                raise Rejected(
                    Reason.CHECK_BAD_NOTICE,
                    f"a verdict of window {v.window} in the notice of window {window} "
                    f"(verdicts name windows {low}..{high})",
                )


def verdict_windows(window: int, grace: int) -> tuple[int, int]:
    """The windows a verdict in the notice of ``window`` may name, both ends included.

    A check of window ``w`` runs in the idle time after ``w``'s report, and may wait there
    ``grace`` windows (``scoring.check_grace``) for its answer, then goes out in the next
    notice: windows ``window - grace - 2`` to ``window``. A validator drops older results
    before it writes (a notice that failed to go out leaves them waiting).
    """
    return max(0, window - grace - 2), window


# -- the rest ---------------------------------------------------------------------------------


def _manifest_text(value: object) -> str:
    if not isinstance(value, str) or len(value) > MAX_MANIFEST_CHARS:
        raise f.FieldError(Reason.BAD_MANIFEST, "not text within bounds")
    return value


class ManifestMeta(Message):
    """A model manifest: its JSON, parsed into ``subnet.versions.ModelManifest`` by the
    versions reader, which also checks it against the header and the key layout."""

    REFUSAL: ClassVar[Reason] = Reason.BAD_MANIFEST

    manifest: f.field(_manifest_text, str, "JSON text, 256 KiB (`ModelManifest`, below)")


class NoMeta(Message):
    """Kinds that carry no metadata (model patches and deltas, check answers, ...)."""


SCHEMAS: dict[ObjectKind, type[Message]] = {
    ObjectKind.GRADIENT: GradientMeta,
    ObjectKind.GRADIENT_COMMIT: CommitMeta,
    ObjectKind.SCORES: ScoreReportMeta,
    ObjectKind.MODEL_PATCH: NoMeta,
    ObjectKind.MODEL_DELTA: NoMeta,
    ObjectKind.CHECKPOINT: GradientMeta,  # a holder's carries none; a gossip worker's, its upload's
    ObjectKind.MODEL_MANIFEST: ManifestMeta,
    ObjectKind.ROOM_MANIFEST: NoMeta,
    ObjectKind.DATASET_SHARD: NoMeta,
    ObjectKind.DATASET_MANIFEST: NoMeta,
    ObjectKind.WEIGHTS: WeightsMeta,
    ObjectKind.DATA_GRANT: GrantMeta,
    ObjectKind.RUN_FINAL: FinalMeta,
    ObjectKind.CHECKS: CheckNotice,
    ObjectKind.CHECK_ANSWER: NoMeta,  # the proven chunks are its tensors
}


def parse_metadata(kind: ObjectKind, metadata: Mapping[str, str], window: int) -> Message:
    """``kind``'s schema applied to an envelope's metadata (``Rejected`` if it does not fit)."""
    return SCHEMAS[ObjectKind(kind)].parse(metadata, window=window)
