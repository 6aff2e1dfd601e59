"""Signed envelopes: how every object that crosses the network is encoded and verified.

`encode_envelope` signs tensors as a hotkey; `verify_envelope` checks an untrusted blob in a fixed
order and returns an `Envelope` or raises `Rejected(reason, detail)`. `fetch_envelope` and
`publish_envelope` combine them with an `ObjectStore` and the key layout.
"""

from subnet.wire.envelope import (
    Envelope,
    encode_envelope,
    envelope_header,
    verify_envelope,
    verify_seal,
)
from subnet.wire.fetch import fetch_envelope, publish_envelope
from subnet.wire.header import Expected, Header, Signer
from subnet.wire.payload import PayloadSpec, TensorSpec, spec_of
from subnet.wire.reasons import Reason, Rejected
from subnet.wire.schema import (
    SCHEMAS,
    CheckNotice,
    CheckVerdict,
    CommitMeta,
    FinalMark,
    FinalMeta,
    GradientMeta,
    GrantMeta,
    ManifestMeta,
    Message,
    ScoreReportMeta,
    WeightsMeta,
)

__all__ = [
    "SCHEMAS",
    "CheckNotice",
    "CheckVerdict",
    "CommitMeta",
    "FinalMark",
    "FinalMeta",
    "GradientMeta",
    "GrantMeta",
    "ManifestMeta",
    "Message",
    "ScoreReportMeta",
    "WeightsMeta",
    "Envelope",
    "Expected",
    "Header",
    "PayloadSpec",
    "Reason",
    "Rejected",
    "Signer",
    "TensorSpec",
    "encode_envelope",
    "envelope_header",
    "fetch_envelope",
    "publish_envelope",
    "spec_of",
    "verify_envelope",
    "verify_seal",
]
