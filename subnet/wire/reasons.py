"""Why an envelope was rejected: one stable code per check, in the order the reader runs them."""

from __future__ import annotations

from enum import Enum


class Reason(str, Enum):
    """Reason codes for rejected envelopes; values are what logs and metrics show."""

    TOO_LARGE = (
        "too_large"  # larger than the reader's limit (checked before download when possible)
    )
    MALFORMED_ENVELOPE = "malformed_envelope"  # bad magic, truncated, header length out of bounds
    MALFORMED_HEADER = "malformed_header"  # header is not valid JSON of the expected schema
    BAD_SIGNATURE = "bad_signature"  # not signed by the expected sender's hotkey
    WRONG_VERSION = "wrong_version"  # envelope layout or protocol version differs from ours
    WRONG_SENDER = "wrong_sender"  # header names a sender other than the bucket's owner
    WRONG_RUN = "wrong_run"
    WRONG_KIND = "wrong_kind"
    WRONG_LANE = "wrong_lane"  # sent on another lane of the run plan than the one read
    WRONG_WINDOW = "wrong_window"  # includes envelopes replayed from an earlier window
    WRONG_BASE_VERSION = "wrong_base_version"  # computed against another model version
    SIZE_MISMATCH = "size_mismatch"  # payload length differs from the signed header
    DIGEST_MISMATCH = "digest_mismatch"  # payload sha256 differs from the signed header
    MALFORMED_PAYLOAD = "malformed_payload"  # not a well-formed safetensors blob
    NAME_MISMATCH = "name_mismatch"  # tensor names differ from the expected set
    DTYPE_MISMATCH = "dtype_mismatch"
    SHAPE_MISMATCH = "shape_mismatch"
    NON_FINITE = "non_finite"  # NaN or infinity in a floating-point tensor
    INDEX_OUT_OF_RANGE = "index_out_of_range"  # a sparse index outside [0, bound)


class Rejected(Exception):
    """An envelope failed a check. `reason` is the code to count; `detail` is for humans."""

    def __init__(self, reason: Reason, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
