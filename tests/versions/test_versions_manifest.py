"""Manifests: validated content, signed by the holder, bound to their key and version."""

from __future__ import annotations

import pytest
from bittensor.sp_core import Keypair
from pydantic import ValidationError
from versions_support import RUN

from subnet.storage import MemoryStore
from subnet.versions import ModelManifest, SyncError, layout, read_manifest, read_pointer
from subnet.versions.manifest import encode_manifest

DIGEST = "ab" * 32


def _manifest(holder: str, version: int = 4, checkpoint_version: int = 3) -> ModelManifest:
    return ModelManifest(
        version=version,
        window=12,
        digest=DIGEST,
        checkpoint_version=checkpoint_version,
        checkpoint_key=layout.checkpoint_key(RUN, holder, checkpoint_version),
        patch_key=layout.patch_key(RUN, holder, version) if version else None,
    )


class _Forger:
    """Claims the holder's address but signs with another key."""

    def __init__(self, claimed: str, key: Keypair) -> None:
        self.ss58_address = claimed
        self._key = key

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)


def test_content_is_validated(holder: Keypair) -> None:
    who = holder.ss58_address
    with pytest.raises(ValidationError):
        _manifest(who, version=2, checkpoint_version=3)
    with pytest.raises(ValidationError):
        ModelManifest(**{**_manifest(who).model_dump(), "patch_key": None})
    with pytest.raises(ValidationError):
        ModelManifest(**{**_manifest(who).model_dump(), "digest": "xyz"})
    with pytest.raises(ValidationError):
        ModelManifest(**_manifest(who).model_dump(), extra=1)


def test_walk_back_reads_each_version(published: MemoryStore, holder: Keypair) -> None:
    who = holder.ss58_address
    assert read_pointer(published, RUN, who).version == 6
    checkpoints = [read_manifest(published, RUN, who, v).checkpoint_version for v in range(7)]
    assert checkpoints == [0, 0, 0, 3, 3, 3, 6]
    assert read_manifest(published, RUN, who, 0).window == -1


def test_manifest_copied_to_another_version_is_rejected(
    published: MemoryStore, holder: Keypair
) -> None:
    who = holder.ss58_address
    published.put(
        layout.manifest_key(RUN, who, 5), published.get(layout.manifest_key(RUN, who, 4), 1 << 16)
    )
    with pytest.raises(SyncError) as caught:
        read_manifest(published, RUN, who, 5)
    assert caught.value.reason == "rejected:wrong_window"


@pytest.mark.parametrize(
    ("forged_by", "reason"),
    [("stranger", "rejected:wrong_sender"), ("forger", "rejected:bad_signature")],
)
def test_manifest_not_signed_by_the_holder_is_rejected(
    published: MemoryStore, holder: Keypair, stranger: Keypair, forged_by: str, reason: str
) -> None:
    who = holder.ss58_address
    signer = stranger if forged_by == "stranger" else _Forger(who, stranger)
    blob = encode_manifest(
        signer, RUN, _manifest(who, version=7, checkpoint_version=6), pointer=True
    )
    published.put(layout.pointer_key(RUN, who), blob)
    with pytest.raises(SyncError) as caught:
        read_pointer(published, RUN, who)
    assert caught.value.reason == reason


def test_manifest_naming_keys_outside_the_layout_is_rejected(holder: Keypair) -> None:
    who = holder.ss58_address
    bad = ModelManifest(**{**_manifest(who).model_dump(), "checkpoint_key": "elsewhere/ckpt"})
    store = MemoryStore()
    store.put(layout.pointer_key(RUN, who), encode_manifest(holder, RUN, bad, pointer=True))
    with pytest.raises(SyncError) as caught:
        read_pointer(store, RUN, who)
    assert caught.value.reason == "bad_manifest"


def test_pointer_is_not_readable_as_a_versioned_manifest(holder: Keypair) -> None:
    who = holder.ss58_address
    store = MemoryStore()
    manifest = _manifest(who)
    store.put(
        layout.manifest_key(RUN, who, 4), encode_manifest(holder, RUN, manifest, pointer=True)
    )
    with pytest.raises(SyncError) as caught:
        read_manifest(store, RUN, who, 4)
    assert caught.value.reason == "rejected:wrong_window"


def test_equivocations_travel_signed_and_bounded(holder: Keypair) -> None:
    who = holder.ss58_address
    miner = Keypair.create_from_uri("//Miner").ss58_address
    plain = _manifest(who)
    assert "equivocations" not in encode_manifest(holder, RUN, plain, pointer=False).decode(
        errors="replace"
    )  # omitted when empty: a manifest without any reads as before
    named = ModelManifest(**{**plain.model_dump(), "equivocations": {miner: "ab" * 300}})
    store = MemoryStore()
    store.put(layout.manifest_key(RUN, who, 4), encode_manifest(holder, RUN, named, pointer=False))
    assert read_manifest(store, RUN, who, 4).equivocations == {miner: "ab" * 300}
    for bad in ({miner: "xyz"}, {miner: "ab" * 2000}, {"short": "ab"},
                {f"{miner[:-2]}{i:02d}": "ab" for i in range(33)}):  # fmt: skip
        with pytest.raises(ValidationError):
            ModelManifest(**{**plain.model_dump(), "equivocations": bad})
