"""Commit-reveal on the scored subnet's ``grads`` lane, in memory on manual clocks.

Window ticks (``conftest``): upload ``[0, 4)``, the validators' snapshot on tick 4, a guard tick,
reveals from tick 6, score ``[4, 8)``, merge from 8. Each test plays one attack or one failure through the
real roles and reads the verdicts the validator logged and what the holder merged.
"""

from __future__ import annotations

import functools
import json

import pytest
from neuron_ticks import run_at

import subnet.neuron.validator as validator_module
from subnet.clock import ManualClock
from subnet.data import random_sample_ids
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.neuron.validator import Validator
from subnet.storage.keys import ObjectKind, object_key
from subnet.wire import Expected, encode_envelope, envelope_header, verify_envelope
from subnet.wire.commit import commit_digest
from subnet.wire.payload import read_table


def verdicts(validator) -> dict[str, str]:
    lines = validator.rt.metrics.path.read_text().splitlines()
    scores = [r for r in map(json.loads, lines) if r["event"] == "scores"][-1]
    return {hk: v[0] for hk, v in scores["verdicts"].items()}


@pytest.fixture
def roles(world, monkeypatch):
    """The holder with version 0 out, two miners and a validator (seeded random samples)."""
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    holder = ModelHolder(world.runtimes["holder"])
    assert holder.try_setup()
    m1, m2 = Miner(world.runtimes["m1"]), Miner(world.runtimes["m2"])
    return holder, m1, m2, Validator(world.runtimes["v1"])


def _key(rt, kind: ObjectKind, hotkey: str, window: int = 0) -> str:
    return object_key(rt.cfg.protocol.run, kind, window, hotkey, lane="grads")


def _overwrite_commit(miner, blob: bytes) -> None:
    """What a copier does in its own bucket: a commit to ``blob``, over the one it wrote."""
    rt = miner.rt
    digest = commit_digest(rt.cfg.protocol.run, "grads", 0, rt.hotkey,
                           envelope_header(blob).payload_sha256)  # fmt: skip
    commit = encode_envelope(signer=rt.signer, run=rt.cfg.protocol.run,
                             kind=ObjectKind.GRADIENT_COMMIT, window=0, tensors={},
                             metadata={"commit": digest}, lane="grads")  # fmt: skip
    rt.store.put(_key(rt, ObjectKind.GRADIENT_COMMIT, rt.hotkey), commit)


def _copy_of(victim, copier) -> bytes:
    """The victim's revealed payload, re-signed by the copier with the copier's receipt."""
    rt = copier.rt
    blob = victim.rt.store.get(_key(rt, ObjectKind.GRADIENT, victim.rt.hotkey), 10**8)
    env = verify_envelope(blob, Expected(rt.cfg.protocol.run, 0, ObjectKind.GRADIENT,
                                         victim.rt.hotkey, lane="grads"), None, max_bytes=10**8)  # fmt: skip
    mine = copier.sealed["grads"]  # the copier's own honest envelope, for its receipt
    meta = dict(env.metadata) | {
        k: v for k, v in _metadata(mine.blob).items() if k in ("receipt", "samples")
    }
    return encode_envelope(signer=rt.signer, run=rt.cfg.protocol.run, kind=ObjectKind.GRADIENT,
                           window=0, tensors=env.tensors, base_version=0, metadata=meta,
                           lane="grads", plan=rt.plan.digest)  # fmt: skip


def _metadata(blob: bytes) -> dict[str, str]:
    header = envelope_header(blob)
    return read_table(blob[len(blob) - header.payload_bytes :])[1]


def test_a_copy_written_over_a_commit_after_the_snapshot_is_refused(roles) -> None:
    holder, victim, copier, validator = roles
    assert run_at(victim, 0) == 0 and run_at(copier, 0) == 0  # both commit honestly
    assert run_at(validator, 4) == 0  # the snapshot closes on the deadline tick
    assert run_at(victim, 6) == 1  # the victim reveals; the copier copies it and races
    copy = _copy_of(victim, copier)
    _overwrite_commit(copier, copy)
    copier.rt.store.put(_key(copier.rt, ObjectKind.GRADIENT, copier.rt.hotkey), copy)
    assert run_at(validator, 6) == 1
    got = verdicts(validator)
    assert got[victim.rt.hotkey] == "scored"
    assert got[copier.rt.hotkey] == "rejected"  # bad_reveal: not what it committed to
    details = [r for r in map(json.loads, validator.rt.metrics.path.read_text().splitlines())
               if r["event"] == "scores"][-1]["details"]  # fmt: skip
    assert details[copier.rt.hotkey] == "bad_reveal"


def test_a_validator_whose_poll_ran_into_the_reveal_does_not_score_the_window(roles) -> None:
    holder, m1, m2, validator = roles
    assert run_at(m1, 0) == 0 and run_at(m2, 0) == 0
    # Its only poll of the commits (for tick 4) ends when the chain is already at tick 5, when
    # a copier could have rewritten its commit after seeing a reveal: nothing read is trusted.
    validator.try_setup()
    validator.rt.clock = ManualClock([], start=5)
    validator.observe(4, 0, 4)
    assert validator.snapshot.of(0) is None
    assert run_at(m1, 6) == 1 and run_at(m2, 6) == 1
    assert run_at(validator, 6) == 1  # its step runs, and scores nobody
    assert not [r for r in map(json.loads, validator.rt.metrics.path.read_text().splitlines())
                if r["event"] == "scores"]  # fmt: skip


def test_a_commit_written_after_the_deadline_is_late_and_its_upload_unread(roles) -> None:
    from subnet.neuron.steps import Step

    holder, m1, m2, validator = roles
    assert run_at(m1, 0) == 0
    assert run_at(validator, 4) == 0  # m2 has not committed by the deadline
    train = m2.rt.plan.slot("miner").steps[0]
    m2.try_setup()
    m2.handle(Step(train, 0, 3))  # m2's commit lands after the snapshot closed
    assert run_at(m1, 6) == 1 and run_at(m2, 6) == 1  # both reveal
    assert run_at(validator, 6) == 1
    assert verdicts(validator) == {m1.rt.hotkey: "scored", m2.rt.hotkey: "late"}


def test_a_restart_between_commit_and_reveal_reveals_the_committed_bytes(roles, world) -> None:
    holder, m1, m2, validator = roles
    assert run_at(m1, 0) == 0 and run_at(m2, 0) == 0
    committed = m1.sealed["grads"].blob
    restarted = Miner(world.runtimes["m1"])  # m1's process died after committing
    assert restarted.try_setup() and restarted.sealed["grads"].blob == committed
    assert run_at(validator, 4) == 0
    assert run_at(restarted, 6) == 1 and run_at(m2, 6) == 1
    assert (
        world.stores["m1"].get(_key(m1.rt, ObjectKind.GRADIENT, m1.rt.hotkey), 10**8) == committed
    )
    assert run_at(validator, 6) == 1
    assert verdicts(validator)[m1.rt.hotkey] == "scored"


def test_bytes_switched_after_the_scoring_are_not_merged(roles) -> None:
    holder, m1, m2, validator = roles
    assert run_at(m1, 0) == 0 and run_at(m2, 0) == 0
    assert run_at(validator, 4) == 0
    assert run_at(m1, 6) == 1 and run_at(m2, 6) == 1
    assert run_at(validator, 6) == 1
    report = [r for r in map(json.loads, validator.rt.metrics.path.read_text().splitlines())
              if r["event"] == "scores"][-1]  # fmt: skip
    assert report["verdicts"][m1.rt.hotkey][0] == "scored"
    assert report["verdicts"][m1.rt.hotkey][1] > 0  # paid, so merged unless the bytes changed
    # Then m1 rewrites its (write-once, but its own) object: m2's update, validly signed by m1
    # with m1's own receipt, so nothing but the bytes differs from what was scored.
    run = m1.rt.cfg.protocol.run
    theirs = verify_envelope(
        m2.rt.store.get(_key(m2.rt, ObjectKind.GRADIENT, m2.rt.hotkey), 10**8),
        Expected(run, 0, ObjectKind.GRADIENT, m2.rt.hotkey, lane="grads"),
        None,
        max_bytes=10**8,
    )
    own = _metadata(m1.rt.store.get(_key(m1.rt, ObjectKind.GRADIENT, m1.rt.hotkey), 10**8))
    switched = encode_envelope(signer=m1.rt.signer, run=run, kind=ObjectKind.GRADIENT, window=0,
                               tensors=theirs.tensors, base_version=0, metadata=own,
                               lane="grads", plan=m1.rt.plan.digest)  # fmt: skip
    m1.rt.store.put(_key(m1.rt, ObjectKind.GRADIENT, m1.rt.hotkey), switched)
    assert run_at(holder, 8) == 1
    uploads = [r for r in map(json.loads, holder.rt.metrics.path.read_text().splitlines())
               if r["event"] == "uploads"][-1]  # fmt: skip
    assert uploads["verdicts"][m1.rt.hotkey] == "accepted"  # a valid upload, of other bytes
    assert m1.rt.hotkey not in uploads["merged"]  # its score was for the bytes scored
    # The holder names m1, with the seal it read, in its next version (the one it published if
    # it merged m2's upload; else publish as after a merge); the validator holds m1's seal of
    # the bytes it scored: two signed payloads for one window, so m1 is banned.
    named = set(holder.caught.pending) | set(holder.publisher.latest.equivocations)
    assert named == {m1.rt.hotkey}
    if holder.caught.pending:
        holder.unpublished = 0
        holder.publish_pending(None)
    assert set(holder.publisher.latest.equivocations) == {m1.rt.hotkey}
    assert not holder.caught.pending
    # Another version goes out before the validator syncs: it still reads the one it passed over.
    version = holder.publisher.latest.version
    holder.unpublished = 1
    holder.publish_pending(None)
    assert holder.publisher.latest.version == version + 1
    assert not holder.publisher.latest.equivocations
    assert validator.book.moving[m1.rt.hotkey] > 0
    assert run_at(m1, 10) == 0 and run_at(m2, 10) == 0
    assert run_at(validator, 14) == 0
    assert run_at(m1, 16) == 1 and run_at(m2, 16) == 1
    assert run_at(validator, 16) == 1  # syncs to the version naming m1, then scores window 1
    assert validator.equivocations.banned == {m1.rt.hotkey: 0}
    assert verdicts(validator) == {m1.rt.hotkey: "rejected", m2.rt.hotkey: "scored"}
    lines = validator.rt.metrics.path.read_text().splitlines()
    report = [r for r in map(json.loads, lines) if r["event"] == "scores"][-1]
    assert report["details"][m1.rt.hotkey] == "equivocated"
    assert validator.book.moving[m1.rt.hotkey] == 0.0  # its moving score went with the ban
    events = [json.loads(x) for x in validator.rt.metrics.path.read_text().splitlines()]
    assert [(e["hotkey"], e["window"]) for e in events if e["event"] == "equivocation"] == [
        (m1.rt.hotkey, 0)
    ]


def test_an_honest_sender_named_by_the_holder_is_not_banned(roles) -> None:
    """A holder (or a validator's report) naming an honest miner proves nothing: the seal it
    publishes is of the very bytes this validator scored, or one the miner never signed."""
    holder, m1, m2, validator = roles
    assert run_at(m1, 0) == 0 and run_at(m2, 0) == 0
    assert run_at(validator, 4) == 0
    assert run_at(m1, 6) == 1 and run_at(m2, 6) == 1
    assert run_at(validator, 6) == 1
    run = m1.rt.cfg.protocol.run

    def seal(miner) -> bytes:
        expected = Expected(run, 0, ObjectKind.GRADIENT, miner.rt.hotkey, lane="grads")
        blob = miner.rt.store.get(_key(miner.rt, ObjectKind.GRADIENT, miner.rt.hotkey), 10**8)
        return verify_envelope(blob, expected, None, max_bytes=10**8).seal

    # m1: the seal of the bytes this validator scored; m2: its seal with another digest put in
    # (m2 never signed that header).
    digest = envelope_header(seal(m2)).payload_sha256
    forged = seal(m2).replace(digest.encode(), ("0" * 64).encode())
    latest = holder.publisher.latest
    manifest = latest.model_copy(update={"equivocations": {
        m1.rt.hotkey: seal(m1).hex(), m2.rt.hotkey: forged.hex()}})  # fmt: skip
    assert validator.equivocations.convict(manifest) == []
    assert validator.equivocations.banned == {}
    # m2's own signature on another payload for window 0 does convict it: the check is real.
    resigned = encode_envelope(signer=m2.rt.signer, run=run, kind=ObjectKind.GRADIENT, window=0,
                               tensors={}, base_version=0, lane="grads")  # fmt: skip
    resealed = resigned[: len(resigned) - envelope_header(resigned).payload_bytes]
    manifest = latest.model_copy(update={"equivocations": {m2.rt.hotkey: resealed.hex()}})
    assert validator.equivocations.convict(manifest) == [(m2.rt.hotkey, 0)]


def test_a_malformed_commit_is_rejected_with_its_reason(roles) -> None:
    holder, m1, m2, validator = roles
    assert run_at(m1, 0) == 0
    m2.rt.store.put(_key(m2.rt, ObjectKind.GRADIENT_COMMIT, m2.rt.hotkey), b"BEAM\x01\x00")
    assert run_at(validator, 4) == 0
    assert run_at(m1, 6) == 1
    assert run_at(validator, 6) == 1
    report = [r for r in map(json.loads, validator.rt.metrics.path.read_text().splitlines())
              if r["event"] == "scores"][-1]  # fmt: skip
    assert report["verdicts"][m2.rt.hotkey][0] == "rejected"
    assert report["details"][m2.rt.hotkey] == "commit_malformed_envelope"


def test_a_bucket_that_fails_now_and_then_is_read_again_and_one_that_keeps_failing_is_not(
    roles, world, monkeypatch
) -> None:
    from subnet.storage.base import StorageError

    holder, m1, m2, validator = roles
    assert run_at(m1, 0) == 0 and run_at(m2, 0) == 0
    calls = {"m1": 0, "m2": 0}

    def flaky(name: str, fails: int):
        real = world.stores[name].get

        def get(key: str, max_bytes: int) -> bytes:
            if "gradient-commit" in key:
                calls[name] += 1
                if calls[name] <= fails:
                    raise StorageError("unavailable", endpoint="memory", bucket=name)
            return real(key, max_bytes)

        return get

    monkeypatch.setattr(world.stores["m1"], "get", flaky("m1", 2))  # twice, then it answers
    monkeypatch.setattr(world.stores["m2"], "get", flaky("m2", 99))  # never answers
    assert run_at(validator, 1, 2, 3, 4) == 0
    assert set(validator.snapshot.of(0).digests) == {m1.rt.hotkey}
    assert calls == {"m1": 3, "m2": 3}  # m2's bucket is left alone after 3 failed reads


def test_a_stalling_bucket_costs_only_its_own_sender(roles, world, monkeypatch) -> None:
    import threading

    from subnet.neuron.commits import CommitSnapshot

    holder, m1, m2, validator = roles
    assert run_at(m1, 0) == 0 and run_at(m2, 0) == 0
    real = world.stores["m2"].get
    stalled, release, answered = threading.Event(), threading.Event(), []

    def stall(key: str, max_bytes: int) -> bytes:
        if "gradient-commit" in key:
            stalled.set()
            release.wait(600)  # until the test lets go: far past the poll's budget
            answered.append(key)
        return real(key, max_bytes)

    monkeypatch.setattr(world.stores["m2"], "get", stall)
    # m1's read gets half a second per poll, however busy the machine; m2's never returns.
    validator.snapshot = CommitSnapshot(budget_s=0.5)
    try:
        assert run_at(validator, 3, 4) == 0
        # Both polls came back while m2's read still hangs: neither waited for it.
        assert stalled.is_set() and not answered
    finally:
        release.set()
    snapshot = validator.snapshot.of(0)
    assert snapshot.complete and set(snapshot.digests) == {m1.rt.hotkey}
    assert run_at(m1, 6) == 1 and run_at(m2, 6) == 1
    assert run_at(validator, 6) == 1
    # m2's commit was there all along but never read in time: missing (not late), scored 0.
    assert verdicts(validator) == {m1.rt.hotkey: "scored", m2.rt.hotkey: "missing"}


def test_a_miner_killed_before_its_commit_went_out_commits_to_the_bytes_it_kept(
    roles, world, monkeypatch
) -> None:
    holder, m1, m2, validator = roles
    real = world.stores["m1"].put_if_absent

    def die(key: str, data: bytes) -> bool:
        if "gradient-commit" in key:
            raise SystemExit("kill -9 between saving the envelope and writing the commit")
        return real(key, data)

    monkeypatch.setattr(world.stores["m1"], "put_if_absent", die)
    with pytest.raises(SystemExit):
        run_at(m1, 0)
    monkeypatch.setattr(world.stores["m1"], "put_if_absent", real)
    kept = Miner(world.runtimes["m1"])
    assert kept.try_setup() and kept.sealed["grads"].window == 0
    blob = kept.sealed["grads"].blob
    assert run_at(kept, 1) == 0  # the train step again: commits to the kept bytes, trains nothing
    assert run_at(m2, 0) == 0 and run_at(validator, 4) == 0
    assert run_at(kept, 6) == 1 and run_at(m2, 6) == 1
    assert world.stores["m1"].get(_key(m1.rt, ObjectKind.GRADIENT, m1.rt.hotkey), 10**8) == blob
    assert run_at(validator, 6) == 1
    assert verdicts(validator)[m1.rt.hotkey] == "scored"  # not bad_reveal


def test_a_reveal_that_fails_is_tried_again_at_the_next_tick(roles, world, monkeypatch) -> None:
    from subnet.storage.base import StorageError

    holder, m1, m2, validator = roles
    assert run_at(m1, 0) == 0 and run_at(m2, 0) == 0 and run_at(validator, 4) == 0
    real, calls = world.stores["m1"].put_if_absent, []

    def flaky(key: str, data: bytes) -> bool:
        if "/gradient/" in key and not calls:
            calls.append(key)
            raise StorageError("unavailable", endpoint="memory", bucket="m1")
        return real(key, data)

    monkeypatch.setattr(world.stores["m1"], "put_if_absent", flaky)
    assert run_at(m1, 6) == 1 and m1.sealed["grads"].pending  # the reveal step ran and failed
    run_at(m1, 7)  # the next tick tries again
    assert "grads" not in m1.sealed
    assert run_at(m2, 6) == 1 and run_at(validator, 7) == 1
    assert verdicts(validator)[m1.rt.hotkey] == "scored"
