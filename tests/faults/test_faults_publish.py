"""Kill the holder (and a validator, and a miner) at every write of a publish, then restart it.

The store dies before or after each write in turn (`CrashingStore`), which is what `kill -9`
does to a publish at that point. Asserted after the restart: the holder resumes and keeps
publishing, the versions are 0..N with increasing windows and no version ever names two models,
and every peer syncs to the last digest.
"""

from __future__ import annotations

import pytest
import torch
from bittensor.sp_core import Keypair
from crash_store import Crash, CrashingStore
from torch import Tensor

from subnet.compression.patch import state_digest
from subnet.storage import MemoryStore, StorageError
from subnet.storage.keys import ObjectKind, object_key
from subnet.versions import (
    ModelSync,
    PublishError,
    VersionPublisher,
    read_manifest,
    read_pointer,
)
from subnet.wire import Expected, ScoreReportMeta, publish_envelope, verify_envelope

RUN = "faults-run"
HOLDER = Keypair.create_from_seed(bytes(range(32)))
VALIDATOR = Keypair.create_from_seed(bytes([7] * 32))
EVERY = 3  # checkpoint_every: versions 0 and 3 carry checkpoints
WINDOWS = [-1, 4, 5, 7, 8]  # windows of versions 0..4 (v0 is the initial model)
MAX = 1 << 24


def _state(seed: int) -> dict[str, Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"a": torch.randn(300, generator=g), "b": torch.randn(4, 50, generator=g)}


STATES = [_state(i) for i in range(len(WINDOWS))]
OTHER = [_state(100 + i) for i in range(len(WINDOWS))]  # what a holder that lost its merge makes


def _digest(state: dict[str, Tensor]) -> str:
    return state_digest(state).hex()


def _run(store, start: int, states: list[dict[str, Tensor]], windows: list[int]) -> None:
    publisher = VersionPublisher(store, HOLDER, RUN, checkpoint_every=EVERY, max_bytes=MAX)
    latest = publisher.resume()
    first = 0 if latest is None else latest.version + 1
    for version in range(max(first, start), len(states)):
        publisher.publish(states[version], windows[version])


def _writes_of_a_full_run() -> int:
    counting = CrashingStore(MemoryStore())
    _run(counting, 0, STATES, WINDOWS)
    return len(counting.writes)


POINTS = [(n, when) for n in range(1, _writes_of_a_full_run() + 1) for when in ("before", "after")]


def _committed(store: MemoryStore) -> list[tuple[int, int, str]]:
    """(version, window, digest) of every committed manifest, from the write-once keys."""
    out, version = [], 0
    while True:
        try:
            m = read_manifest(store, RUN, HOLDER.ss58_address, version)
        except Exception:
            return out
        out.append((m.version, m.window, m.digest))
        version += 1


def _crash_once(store: MemoryStore, at: int, when: str) -> None:
    with pytest.raises(Crash):
        _run(CrashingStore(store, at, when), 0, STATES, WINDOWS)  # type: ignore[arg-type]


@pytest.mark.parametrize(("at", "when"), POINTS)
def test_holder_that_keeps_its_merge_publishes_exactly_what_an_uninterrupted_one_does(
    at: int, when: str
) -> None:
    """The holder saves its merge before publishing, so after a restart it publishes the same."""
    store = MemoryStore()
    _crash_once(store, at, when)
    _run(store, 0, STATES, WINDOWS)  # restarted: resume, then the rest
    want = [(v, WINDOWS[v], _digest(s)) for v, s in enumerate(STATES)]
    assert _committed(store) == want
    assert read_pointer(store, RUN, HOLDER.ss58_address).version == len(STATES) - 1
    _assert_every_peer_syncs(store, STATES[-1])


@pytest.mark.parametrize(("at", "when"), POINTS)
def test_holder_that_lost_its_merge_is_never_blocked_by_its_own_orphans(at: int, when: str) -> None:
    """Worst case: the restarted holder merges something else. Orphans of the crashed attempt
    are overwritten; a committed version is adopted; no version names two models."""
    store = MemoryStore()
    _crash_once(store, at, when)
    publisher = VersionPublisher(store, HOLDER, RUN, checkpoint_every=EVERY, max_bytes=MAX)
    latest = publisher.resume()
    start = 0 if latest is None else latest.version + 1
    later = [w + 100 for w in WINDOWS]  # the restarted holder merges later windows
    for version in range(start, len(STATES)):
        publisher.publish(OTHER[version], later[version])
    committed = _committed(store)
    assert [v for v, _, _ in committed] == list(range(len(STATES)))  # nothing stalled
    windows = [w for _, w, _ in committed]
    assert windows == sorted(set(windows))  # no window merged twice
    for version, window, digest in committed:
        expected = (WINDOWS, STATES) if version < start else (later, OTHER)
        assert (window, digest) == (expected[0][version], _digest(expected[1][version]))
    _assert_every_peer_syncs(store, OTHER[-1] if start < len(STATES) else STATES[-1])


def _assert_every_peer_syncs(store: MemoryStore, final: dict[str, Tensor]) -> None:
    """A fresh peer (checkpoint path) and one at each older version (patch path) reach `final`."""
    who = HOLDER.ss58_address
    fresh, manifest = ModelSync(store, who, RUN, max_bytes=MAX).sync(None, None)
    assert manifest.digest == _digest(final) == _digest(fresh)
    for version in range(manifest.version):
        syncer = ModelSync(store, who, RUN, max_bytes=MAX)
        old, _ = syncer.sync_to(read_manifest(store, RUN, who, version), None, None)
        state, _ = syncer.sync(old, version)
        assert _digest(state) == manifest.digest


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_retried_report_or_upload_of_the_same_window_does_not_wedge(when: str) -> None:
    """A validator (or miner) killed at its write retries the window with other bytes: the
    write-once key keeps one valid envelope and the retry returns normally."""
    store = MemoryStore()
    first, second = torch.tensor([0.5, 0.25]), torch.tensor([0.75, 0.0])
    report = ScoreReportMeta(scores={VALIDATOR.ss58_address: 0.5}, digests={}).wire()
    fields = {"signer": VALIDATOR, "run": RUN, "kind": ObjectKind.SCORES, "window": 9}
    fields |= {"metadata": report}
    with pytest.raises(Crash):
        publish_envelope(CrashingStore(store, 1, when), tensors={"scores": first}, **fields)  # type: ignore[arg-type]
    key, written = publish_envelope(store, tensors={"scores": second}, **fields)
    assert written is (when == "before")
    expected = Expected(RUN, 9, ObjectKind.SCORES, VALIDATOR.ss58_address)
    assert key == object_key(RUN, ObjectKind.SCORES, 9, VALIDATOR.ss58_address)
    envelope = verify_envelope(store.get(key, MAX), expected, None, max_bytes=MAX)
    assert torch.equal(envelope.tensors["scores"], first if when == "after" else second)
    _, again = publish_envelope(store, tensors={"scores": second}, **fields)
    assert again is False  # later retries are harmless too


class _PointerFailsOnce(CrashingStore):
    """An outage (not a crash) on the first pointer write: the same publisher retries."""

    def put(self, key: str, data: bytes) -> None:
        if "/latest/" in key and not getattr(self, "failed", False):
            self.failed = True
            raise StorageError("unavailable", endpoint="test", bucket="test", key=key)
        self.inner.put(key, data)


def test_a_publish_retried_in_process_after_the_pointer_failed_finishes_the_same_version() -> None:
    store = MemoryStore()
    _run(store, 0, STATES[:2], WINDOWS)
    publisher = VersionPublisher(_PointerFailsOnce(store), HOLDER, RUN, checkpoint_every=EVERY,
                                 max_bytes=MAX)  # fmt: skip
    with pytest.raises(StorageError):
        publisher.publish(STATES[2], WINDOWS[2])  # manifest 2 committed, pointer not
    assert publisher.publish(STATES[2], WINDOWS[2]).version == 2  # the holder's next window
    assert read_pointer(store, RUN, HOLDER.ss58_address).version == 2
    with pytest.raises(PublishError) as caught:
        VersionPublisher(store, HOLDER, RUN, checkpoint_every=EVERY, max_bytes=MAX).publish(
            OTHER[2], WINDOWS[2]
        )
    assert caught.value.reason == "window_not_after_latest"
