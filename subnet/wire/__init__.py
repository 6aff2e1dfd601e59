"""Signed envelopes: how every object that crosses the network is encoded and verified.

`encode_envelope` signs tensors as a hotkey; `verify_envelope` checks an untrusted blob in a fixed
order and returns an `Envelope` or raises `Rejected(reason, detail)`. `fetch_envelope` and
`publish_envelope` combine them with an `ObjectStore` and the key layout.

The names below are loaded on first use (``subnet.lazy``): importing the package, or its
reasons or schemas alone (a room command's errors), imports no torch.
"""

from subnet.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "envelope": [
            "Envelope",
            "encode_envelope",
            "envelope_header",
            "verify_envelope",
            "verify_seal",
        ],
        "fetch": ["fetch_envelope", "publish_envelope"],
        "header": ["Expected", "Header", "Signer"],
        "payload": ["PayloadSpec", "TensorSpec", "spec_of"],
        "reasons": ["Reason", "Rejected"],
        "schema": [
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
        ],
    },
)
