"""Why a peer's message was refused: one enum for every refusal in Beam.

Every reader of peer data (the envelope reader, the metadata schemas, the compressors' payload
checks, score reports, the uploads a validator or holder takes, checks of training, model versions, room
documents) refuses with a member of :class:`Reason`, or with one of the few composite codes of
:data:`PREFIXES` (a context and a member: ``commit_bad_signature``, ``rejected:wrong_run``).
Values are what logs, metrics and tests show; the table in ``docs/protocol.md`` is generated
from this enum (``python scripts/wire_reference.py``).
"""

from __future__ import annotations

from enum import Enum


class Reason(str, Enum):
    """A refusal code. Its value is the string logs and metrics show; ``doc`` says when."""

    doc: str

    def __new__(cls, value: str, doc: str) -> Reason:
        member = str.__new__(cls, value)
        member._value_ = value
        member.doc = doc
        return member

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    # -- the envelope, in the order the reader checks (``subnet.wire.verify_envelope``) --------
    TOO_LARGE = (
        "too_large",
        "larger than the reader's limit (checked before download when possible)",
    )
    MALFORMED_ENVELOPE = "malformed_envelope", "bad magic, truncated, header length out of bounds"
    MALFORMED_HEADER = "malformed_header", "the header is not JSON of the header schema"
    BAD_SIGNATURE = "bad_signature", "not signed by the expected sender's hotkey"
    WRONG_VERSION = "wrong_version", "envelope layout or protocol version differs from ours"
    WRONG_SENDER = "wrong_sender", "the header names a sender other than the bucket's owner"
    WRONG_RUN = "wrong_run", "made for another run"
    WRONG_KIND = "wrong_kind", "an object (or room document) of another kind"
    WRONG_LANE = "wrong_lane", "sent on another lane of the run plan than the one read"
    WRONG_WINDOW = "wrong_window", "made for another window (includes replays of earlier ones)"
    WRONG_BASE_VERSION = "wrong_base_version", "computed against another model version (stale)"
    WRONG_PLAN = "wrong_plan", "made under another run plan or other protocol settings"
    SIZE_MISMATCH = "size_mismatch", "payload length differs from the signed header"
    DIGEST_MISMATCH = "digest_mismatch", "payload sha256 (or a synced model's digest) differs"
    MALFORMED_PAYLOAD = (
        "malformed_payload",
        "not a well-formed safetensors blob; a commit without a digest",
    )
    NAME_MISMATCH = "name_mismatch", "tensor names differ from the expected set"
    DTYPE_MISMATCH = "dtype_mismatch", "a tensor of another dtype"
    SHAPE_MISMATCH = "shape_mismatch", "a tensor of another shape"
    NON_FINITE = "non_finite", "NaN or infinity in a floating-point tensor"
    INDEX_OUT_OF_RANGE = "index_out_of_range", "a sparse index outside [0, bound)"
    # -- the signed metadata (``subnet.wire.schema``) ------------------------------------------
    BAD_METADATA = "bad_metadata", "a metadata field that is missing, unknown or does not parse"
    BAD_RECEIPT = (
        "bad_receipt",
        "not the receipt of the assigned samples, nor of a whole-step prefix",
    )
    BAD_GRANT = "bad_grant", "a data grant that is not {hotkey: [unit, ...]} within bounds"
    BAD_FINAL = "bad_final", "a final marker that is not {window, loss} within bounds"
    NOT_TEXT = "not_text", "a report field that is not a string"
    TOO_LONG = "too_long", "a report longer than its bound"
    NOT_JSON = "not_json", "not valid JSON (NaN and Infinity literals and huge numbers included)"
    TOO_DEEP = "too_deep", "JSON nested beyond the parser's limit"
    NOT_AN_OBJECT = "not_an_object", "the top level is not a {hotkey: value} object"
    TOO_MANY_ENTRIES = "too_many_entries", "more entries than the bound"
    DUPLICATE_KEY = (
        "duplicate_key",
        "the same key twice: a hotkey in a report, a key of a header or payload table",
    )
    BAD_KEY = "bad_key", "a key that is not a valid ss58 address"
    BAD_SCORE = "bad_score", "a score that is not a finite number within bounds (booleans too)"
    BAD_DIGEST = "bad_digest", "a digest that is not 64 lowercase hex characters"
    # -- a compressor's payload check (``subnet.compression``) and model patches --------------
    MISSING_TENSOR = "missing_tensor", "a part of the encoding is missing"
    UNEXPECTED_TENSOR = "unexpected_tensor", "a part the encoding does not have"
    UNSORTED_INDEX = "unsorted_index", "sparse indices out of order (sparseloco)"
    INVALID_VALUE = "invalid_value", "a value the codec cannot hold (int8 scales, Rice streams)"
    BASE_MISMATCH = "base_mismatch", "a patch against another base state"
    HASH_MISMATCH = "hash_mismatch", "a patched state whose hash is not the one named"
    STATE_MISMATCH = "state_mismatch", "a delta or state whose tensor names or shapes differ"
    CORRUPT = "corrupt", "a patch stream that does not decompress"
    # -- an upload, as a validator or holder takes it (``subnet.neuron.uploads``) -------------
    NO_BUCKET = "no_bucket", "the sender has no usable storage commitment"
    BAD_REVEAL = "bad_reveal", "a reveal whose payload does not give the sender's commit"
    TOO_FEW_STEPS = "too_few_steps", "a prefix shorter than protocol.inner.min_steps steps"
    UNREADABLE = (
        "unreadable",
        "the sender's bucket or message broke its reader (logged with a traceback)",
    )
    EQUIVOCATED = "equivocated", "banned: the holder's version proved two payloads for one window"
    NON_FINITE_LOSS = "non_finite_loss", "the update makes the loss NaN or infinite"
    # -- checks of training (``subnet.neuron.checks``, ``subnet.verify``) ---------------------
    CHECK_MALFORMED = (
        "check_malformed",
        "error-feedback roots (state_in, state_from, state_out) missing or inconsistent",
    )
    CHECK_BROKEN_CHAIN = (
        "check_broken_chain",
        "state_in is not the state_out its sender committed to in window state_from",
    )
    CHECK_BAD_NOTICE = "check_bad_notice", "a check notice whose targets or verdicts do not parse"
    CHECK_BAD_ANSWER = "check_bad_answer", "an answer that is not the named chunks, or unreadable"
    CHECK_BAD_PROOF = "check_bad_proof", "an answered chunk whose proof does not reach its root"
    CHECK_STEPS = "check_steps", "samples that do not make the claimed steps"
    CHECK_NON_FINITE = "check_non_finite", "an answered or replayed value that is not finite"
    CHECK_CODEC = "check_codec", "the upload is not the codec's output of the answered input"
    CHECK_MISMATCH = (
        "check_mismatch",
        "the replay's codec input differs from the answer's beyond scoring.check_tolerance",
    )
    CHECK_UNANSWERED = "check_unanswered", "named in a notice, no answer within check_grace windows"
    CHECK_UNREVEALED = (
        "check_unrevealed",
        "named in a notice, the committed upload not revealed within check_grace windows",
    )
    CHECK_BANNED = "check_banned", "a check of this sender failed here (or was confirmed here)"
    CLASS_REFUSED = (
        "class_refused",
        "trained in a replay class the subnet's scoring.classes does not accept",
    )
    # -- model versions (``subnet.versions``) ---------------------------------------------------
    NOT_PUBLISHED = "not_published", "the holder has no manifest yet"
    MISSING_VERSION = (
        "missing_version",
        "a patch, delta, checkpoint or manifest relied on is absent",
    )
    ROLLBACK = "rollback", "a version (or room manifest) older than one already seen"
    BAD_MANIFEST = (
        "bad_manifest",
        "a model manifest that breaks its schema, its header or the layout",
    )
    NO_READER = "no_reader", "no valid storage commitment for the holder"
    # -- room documents (``subnet.room``) -------------------------------------------------------
    MALFORMED = "malformed", "a room document that is not JSON of its schema, or too large"
    FORGED = "forged", "validly signed by a key that may not sign it"
    WRONG_ROOM = "wrong_room", "made for another room"
    EXPIRED = "expired", "an invite past its expiry"
    REUSED = "reused", "an invite nonce already redeemed"
    ALREADY_MEMBER = "already_member", "a redemption by a member"
    NOT_MEMBER = "not_member", "an action by (or on) a hotkey that is not a member"
    NOT_AUTHORIZED = "not_authorized", "a manifest version its signer may not publish"
    BAD_TRANSITION = "bad_transition", "a manifest version that does not follow its predecessor"
    FORK = "fork", "two different manifests for one version"
    POINTER_MISMATCH = "pointer_mismatch", "the latest pointer differs from the version it names"
    NOT_FOUND = "not_found", "no such room, version, invite or redemption"
    UNREACHABLE = "unreachable", "the room's storage did not answer, or refused our credentials"
    CONFLICT = "conflict", "a write-once key already holds something else"
    BAD_REQUEST = "bad_request", "a request the room cannot satisfy"


def _span(first: Reason, last: Reason) -> tuple[Reason, ...]:
    members = list(Reason)
    return tuple(members[members.index(first) : members.index(last) + 1])


# Who refuses with which codes (each code in one section, in the enum's order)
SECTIONS: dict[str, tuple[Reason, ...]] = {
    "the envelope, in the order the reader checks (`subnet.wire.verify_envelope`)": _span(
        Reason.TOO_LARGE, Reason.INDEX_OUT_OF_RANGE
    ),
    "the signed metadata (`subnet.wire.schema`; score reports and weights)": _span(
        Reason.BAD_METADATA, Reason.BAD_DIGEST
    ),
    "a payload codec's check (`subnet.compression`) and model patches": _span(
        Reason.MISSING_TENSOR, Reason.CORRUPT
    ),
    "an upload, as a validator or the holder takes it (`subnet.neuron.uploads`)": _span(
        Reason.NO_BUCKET, Reason.NON_FINITE_LOSS
    ),
    "checks of training (`subnet.neuron.checks`, `subnet.verify`)": _span(
        Reason.CHECK_MALFORMED, Reason.CLASS_REFUSED
    ),
    "model versions (`subnet.versions`)": _span(Reason.NOT_PUBLISHED, Reason.NO_READER),
    "room documents (`subnet.room`)": _span(Reason.MALFORMED, Reason.BAD_REQUEST),
}
# The envelope reader's own checks, in order (before the metadata's schema: ``subnet.wire.schema``)
ENVELOPE_CHECKS: tuple[Reason, ...] = next(iter(SECTIONS.values()))

# Composite codes: a context prefix and a member (or, after ``storage:``, a storage reason).
PREFIXES: dict[str, str] = {
    "commit_": "a validator refused the sender's commit with this reason",
    "rejected:": "a model version object refused by the envelope reader",
    "patch:": "a model patch that did not apply",
    "delta:": "a sparse model delta the codec refused",
    "storage:": "a storage failure while syncing (a `subnet.storage` reason, not a refusal)",
}


def is_code(text: str) -> bool:
    """Whether ``text`` is a refusal code: a member's value, or a prefix and one."""
    if text in Reason._value2member_map_:
        return True
    for prefix in PREFIXES:
        rest = text.removeprefix(prefix)
        if rest != text and (prefix == "storage:" or rest in Reason._value2member_map_):
            return bool(rest)
    return False


class Rejected(Exception):
    """An envelope failed a check. `reason` is the code to count; `detail` is for humans."""

    def __init__(self, reason: Reason, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
