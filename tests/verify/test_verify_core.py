"""The pure core of checks: the Merkle commitment, the chunk map, the draws, answers and the check."""

from __future__ import annotations

import pytest
import torch

from subnet.compression import ErrorFeedback, build_compressor
from subnet.compression.config import CompressionConfig
from subnet.verify import merkle
from subnet.verify.answer import BadAnswer, encode_answer, parse_answer
from subnet.verify.check import Chunk, check, tolerance
from subnet.verify.chunks import FRESH, ChunkMap
from subnet.verify.draw import chunk_sample, places, targets

SHAPES = {"emb": (100, 64), "w": (128, 128), "norm": (64,)}


def _state(seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {n: torch.randn(s, generator=gen) for n, s in SHAPES.items()}


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
def test_every_leaf_is_proven_against_the_root_and_nothing_else_is(n: int) -> None:
    leaves = [merkle.leaf_digest(bytes([i])) for i in range(n)]
    top = merkle.root(leaves)
    for i, path in enumerate(merkle.proofs(leaves, range(n))):
        assert merkle.verify(leaves[i], i, path, n, top)
        assert not merkle.verify(merkle.leaf_digest(b"x"), i, path, n, top)
        if n > 1:
            assert not merkle.verify(leaves[i], (i + 1) % n, path, n, top)
    assert not merkle.verify(leaves[0], n, merkle.proofs(leaves, [0])[0], n, top)


def test_the_chunk_map_cuts_as_sparseloco_does_and_commits_to_every_value() -> None:
    chunks = ChunkMap.of(SHAPES, 64)
    # emb: 6,400 values flat = 1 chunk of 4,096 + a tail of 2,304; w: 4 blocks; norm: a tail
    assert [(r[0], r[2]) for r in chunks.refs] == [
        ("emb", 4096), ("emb", 2304), ("norm", 64), ("w", 4096), ("w", 4096), ("w", 4096),
        ("w", 4096),
    ]  # fmt: skip
    state = _state(0)
    root = chunks.commit(state)
    assert chunks.commit({}) == FRESH and len(root) == 64
    poked = {k: v.clone() for k, v in state.items()}
    poked["w"][127, 0] += 1e-6
    assert chunks.commit(poked) != root
    # a block of w is its 64 x 64 square, row by row
    (block,) = chunks.chunks(state, [4])
    assert torch.equal(block, state["w"][:64, 64:].reshape(-1))


def test_draws_are_deterministic_spread_and_distinct_per_validator() -> None:
    chunks = ChunkMap.of(SHAPES, 64)
    a = chunk_sample("beef", "run", "grads", 3, "m1", chunks, 0.3)
    assert a == chunk_sample("beef", "run", "grads", 3, "m1", chunks, 0.3)
    assert a != chunk_sample("beef", "run", "grads", 3, "m2", chunks, 0.3)
    assert len(a) == 3 and a == sorted(set(a))
    miners = [f"m{i}" for i in range(8)]
    vals = ["v0", "v1", "v2"]
    everyone = set(miners)
    picks = [targets("beef", "run", "grads", 3, miners, everyone, vals, v, 1, 1.0) for v in vals]
    assert len({p[0] for p in picks}) == 3  # three validators, three different verified uploads
    # newcomers: every validator that named none yet starts at the head of the same queue
    picks = [targets("beef", "run", "grads", 3, miners, set(), vals, v, 1, 1.0) for v in vals]
    assert len({p[0] for p in picks}) == 1
    # with both groups, a fair coin: half of the checks go to newcomers
    verified = set(miners[:6])
    firsts = [targets(f"b{w}", "run", "grads", w, miners, verified, vals, "v0", 1, 1.0)[0]
              for w in range(400)]  # fmt: skip
    share_new = sum(hk in {"m6", "m7"} for hk in firsts) / 400
    assert 0.42 < share_new < 0.58
    # at most ceil(share * uploads) places: validators beyond them check the same again
    assert places(8, 3, 1, 0.25) == 2
    assert targets("beef", "r", "g", 1, miners, set(), vals, "v2", 1, 0.25) == targets(
        "beef", "r", "g", 1, miners, set(), vals, "v0", 1, 0.25
    )
    assert targets("beef", "r", "g", 1, miners, set(), vals, "outsider", 1, 1.0) == []


def _window(seed: int = 0, fresh: bool = False):
    """A miner's honest window on SHAPES: (e_in, delta, e_out, payload, decoded)."""
    comp = build_compressor(CompressionConfig(name="sparseloco-rice", topk=8, chunk=64))
    ef = ErrorFeedback(0.95)
    if not fresh:
        ef.load_state_dict({k: v * 0.01 for k, v in _state(seed + 100).items()})
    before = ef.state_dict() if not fresh else {}
    delta = {k: v * 0.01 for k, v in _state(seed).items()}
    payload, decoded = ef.compress(comp, delta)
    return comp, before, delta, ef.state_dict(), payload, decoded


def _chunks(chunks, ids, replayed, before, after, decoded, comp):
    out = []
    for i, r, e_in, e_out, sent in zip(
        ids,
        chunks.chunks(replayed, ids),
        chunks.chunks(before, ids),
        chunks.chunks(after, ids),
        chunks.chunks(decoded, ids),
        strict=True,
    ):
        name, _, size = chunks.refs[i]
        layout = comp.sparse.layout(SHAPES[name])
        k_full, k_tail = layout.kept(comp.sparse.topk)
        k = k_tail if chunks.refs[i][1] == layout.full and layout.tail else k_full
        out.append(Chunk(name, r, e_in, e_out, sent, sent != 0, k))
    return out


def _levels(decoded):
    return {k: torch.unique(v[v != 0]) for k, v in decoded.items()}


@pytest.mark.parametrize("fresh", [False, True])
def test_an_honest_window_passes_and_answers_prove_its_chunks(fresh: bool) -> None:
    comp, before, delta, after, payload, decoded = _window(fresh=fresh)
    chunks = ChunkMap.of(SHAPES, 64)
    ids = chunk_sample("beef", "run", "grads", 1, "m", chunks, 0.5)
    roots = chunks.commit(before), chunks.commit(after)
    answer = parse_answer(chunks, ids, encode_answer(chunks, ids, before, after), *roots)
    # the replay differs in the last bits, as another kernel path would
    noisy = {k: v * (1 + 1e-7 * torch.randn_like(v)) for k, v in delta.items()}
    parts = _chunks(chunks, ids, noisy, before, after, decoded, comp)
    assert [torch.equal(a, p.ef_out) for a, p in zip(answer.ef_out, parts, strict=True)]
    outcome = check(parts, 0.95, 1e-4, "sparse", _levels(decoded))
    assert outcome.ok and outcome.error < 1e-5


def test_a_forged_chunk_a_swapped_answer_or_wrong_parts_are_refused() -> None:
    comp, before, delta, after, payload, decoded = _window()
    chunks = ChunkMap.of(SHAPES, 64)
    ids = chunk_sample("beef", "run", "grads", 1, "m", chunks, 0.5)
    roots = chunks.commit(before), chunks.commit(after)
    tensors = encode_answer(chunks, ids, before, after)
    forged = dict(tensors, out=tensors["out"].clone())
    forged["out"][3] += 1e-3
    with pytest.raises(BadAnswer, match="check_bad_proof"):
        parse_answer(chunks, ids, forged, *roots)
    with pytest.raises(BadAnswer, match="check_bad_proof"):  # the other window's roots
        parse_answer(chunks, ids, tensors, roots[1], roots[0])
    with pytest.raises(BadAnswer, match="check_bad_answer"):
        parse_answer(chunks, ids, {k: v for k, v in tensors.items() if k != "in"}, *roots)
    with pytest.raises(BadAnswer, match="check_bad_answer"):
        parse_answer(chunks, ids[:-1], tensors, *roots)


def test_lies_about_the_update_or_the_error_feedback_fail() -> None:
    comp, before, delta, after, payload, decoded = _window()
    chunks = ChunkMap.of(SHAPES, 64)
    ids = list(range(chunks.n))
    honest = _chunks(chunks, ids, delta, before, after, decoded, comp)
    assert check(honest, 0.95, 1e-4, "sparse", _levels(decoded)).ok
    # a bias in the error feedback it keeps (the state poisoner): its claimed input moves
    biased = {k: v - 0.002 * torch.sign(v) for k, v in after.items()}
    outcome = check(_chunks(chunks, ids, delta, before, biased, decoded, comp), 0.95, 1e-4)
    assert outcome.reason == "check_mismatch"
    # an update scaled up (the inflater), the error feedback kept honestly: positions agree,
    # but the input it implies is not the replay's
    inflated = {k: 3 * v for k, v in decoded.items()}
    outcome = check(_chunks(chunks, ids, delta, before, after, inflated, comp), 0.95, 1e-4)
    assert outcome.reason in {"check_mismatch", "check_codec"}
    # the poisoner's trick: send anything, and claim the error feedback that explains it
    target = {k: v.clone() for k, v in decoded.items()}
    target["w"][0, :8] = 0.5  # positions the top-k would not pick
    covered = {k: 0.95 * before[k] + delta[k] - target[k] for k in delta}
    outcome = check(_chunks(chunks, ids, delta, before, covered, target, comp), 0.95, 1e-4)
    assert outcome.reason == "check_codec"
    # fewer steps than claimed: the replay's update is not what it sent
    lazy = {k: v * 0.5 for k, v in delta.items()}
    outcome = check(_chunks(chunks, ids, lazy, before, after, decoded, comp), 0.95, 1e-4)
    assert outcome.reason == "check_mismatch" and outcome.error > 0.01


def test_a_checks_tolerance_is_the_floor_or_the_margin_times_the_measured_chaos() -> None:
    assert tolerance(2e-4, 4.0, None) == 2e-4  # no probe ran: the fixed tolerance
    assert tolerance(2e-4, 4.0, 1e-5) == 2e-4  # a calm window: never below the floor
    assert tolerance(2e-4, 4.0, 1e-3) == 4e-3  # a chaotic one: margin x spread
    assert tolerance(2e-4, 0.0, 1e-3) == 2e-4  # margin 0 turns the probe's say off


def test_newcomers_can_never_starve_the_checks_of_verified_senders() -> None:
    vals = ["v0", "v1"]
    verified = {f"m{i}" for i in range(5)}
    many_new = [f"n{i}" for i in range(8)]  # late answerers, say, that stay newcomers
    uploads = sorted(verified) + many_new
    counts = dict.fromkeys(verified, 0)
    windows = 2000
    for window in range(windows):
        beacon = f"b{window}"
        chosen = [targets(beacon, "r", "g", window, uploads, verified, vals, v, 1, 1.0)[0]
                  for v in vals]  # fmt: skip
        picked = [hk for hk in chosen if hk in verified]
        assert len(set(picked)) == len(picked)  # the same shuffle, another place each
        for hk in picked:
            counts[hk] += 1
    for hk in verified:  # K / 2W = 2 / 10 a window each, whatever the 8 newcomers do
        assert abs(counts[hk] / windows - 0.2) < 0.04, (hk, counts[hk])


def test_each_validator_checks_newcomers_of_its_own_view_in_its_own_queue() -> None:
    vals = ["v0", "v1"]
    miners = [f"m{i}" for i in range(6)]
    # v1 verified m0 and m1 itself; v0 verified nobody yet: every check of v0's is a newcomer
    for w in range(50):
        (first,) = targets(f"b{w}", "r", "g", w, miners, set(), vals, "v0", 1, 1.0)
        assert first in miners
    seen = {targets(f"b{w}", "r", "g", w, miners, {"m0", "m1"}, vals, "v1", 1, 1.0)[0]
            for w in range(200)}  # fmt: skip
    assert {"m0", "m1"} <= seen and seen - {"m0", "m1"}  # both groups get its checks
    # the queue: never named first, then by the last window named
    named = {"m2": 4, "m3": 6}
    for w in range(50):
        got = targets(f"b{w}", "r", "g", 7, miners, {"m0", "m1"}, vals, "v0", 4, 1.0, named)
        new = [hk for hk in got if hk not in {"m0", "m1"}]
        assert new == sorted(new, key=lambda hk: named.get(hk, -1))
        assert not new or new[0] in {"m4", "m5"}


def test_newcomers_are_split_between_groups_of_quorum_validators() -> None:
    # 8 validators in groups of 2 (QUORUM): each group checks its own newcomer (whose two
    # passes verify it at every other validator), so 4 are checked a window, not 1; a lone
    # newcomer is checked by every group at once.
    vals = sorted(f"v{i}" for i in range(8))
    newcomers = [f"m{i:02d}" for i in range(16)]

    def picks(uploads: list[str]) -> list[str]:
        return [
            targets("pulse", "r", "g", 3, uploads, set(), vals, v, 1, 0.25, {}, 2)[0] for v in vals
        ]

    chosen = picks(newcomers)
    assert all(chosen[2 * g] == chosen[2 * g + 1] for g in range(4)), chosen
    assert len(set(chosen)) == 4, chosen
    assert set(picks(["m00"])) == {"m00"}
    # without groups every validator takes the head of the same queue
    assert (
        len(
            {targets("pulse", "r", "g", 3, newcomers, set(), vals, v, 1, 0.25, {})[0] for v in vals}
        )
        == 1
    )
