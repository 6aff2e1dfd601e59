"""The assessor on a real (tiny) model: per-sample losses, references, and copy evidence.

Synthetic data makes the answer known: every row walks the vocabulary in small random steps, so
training helps every row (the steps are learnable) and memorizes its own rows (the particular
steps are not), and an update is specific to the rows it was trained on and to no others.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest
import torch

from subnet.model import build_model, evaluate_loss
from subnet.scoring import (
    Match,
    ScoringConfig,
    find_matches,
    judge_matches,
    score_window,
    twins,
)
from subnet.scoring.assess import (
    COMMON_MOST,
    AsMerged,
    WindowProbe,
    assess_window,
    leave_one_out,
    own_subset,
    references,
)
from subnet.training import InnerConfig, pseudo_gradient, snapshot, train_inner
from subnet.training.aggregation import global_norm

VOCAB, SEQ, ROWS = 64, 16, 256
_G = torch.Generator().manual_seed(0)
DATA = (
    torch.randint(0, VOCAB, (ROWS, 1), generator=_G)
    + torch.randint(1, 4, (ROWS, SEQ + 1), generator=_G).cumsum(1)
) % VOCAB


def batches(ids: list[int], size: int = 8):
    for i in range(0, len(ids), size):
        rows = DATA[ids[i : i + size]]
        yield rows[:, :-1], rows[:, 1:]


def test_own_subset_is_all_ids_or_an_unpredictable_sample_of_them() -> None:
    ids = list(range(10, 30))
    assert own_subset(ids, 50) == ids
    picked = own_subset(ids, 5, random.Random(3))
    assert len(set(picked)) == 5 and set(picked) <= set(ids)


def test_leave_one_out_is_the_mean_of_the_others_after_clipping() -> None:
    deltas = {"a": {"w": torch.tensor([1.0, 0.0])}, "b": {"w": torch.tensor([0.0, 1.0])},
              "c": {"w": torch.tensor([0.0, 30.0])}}  # fmt: skip
    ref = leave_one_out(deltas)
    # Median norm 1: c is clipped to [0, 1] before it enters anyone's reference.
    assert torch.allclose(ref("a")["w"], torch.tensor([0.0, 1.0]))
    assert torch.allclose(ref("c")["w"], torch.tensor([0.5, 0.5]))
    assert leave_one_out({"a": deltas["a"]})("a") is None


def test_from_four_uploads_one_shared_clipped_mean_is_everyones_reference() -> None:
    deltas = {hk: {"w": torch.tensor([float(i), 1.0])} for i, hk in enumerate("abcd")}
    deltas["d"] = {"w": torch.tensor([300.0, 0.0])}  # clipped to the median norm first
    ref = references(deltas)
    key, common = ref("a")
    assert key == "common" and ref("d")[0] == "common"
    norms = sorted([1.0, 2**0.5, 5**0.5, 300.0])
    median = (norms[1] + norms[2]) / 2
    expected = (torch.tensor([0.0, 1.0]) + torch.tensor([1.0, 1.0]) + torch.tensor([2.0, 1.0])
                * min(1.0, median / 5**0.5) + torch.tensor([median, 0.0])) / 4  # fmt: skip
    assert torch.allclose(common["w"], expected)
    assert references({"a": deltas["a"], "b": deltas["b"]})("a")[0] == "loo/a"


def test_past_common_most_uploads_the_reference_is_a_fresh_draw_clipped_by_every_norm() -> None:
    """Known answer: with COMMON_MOST + 36 uploads the reference is the mean of the COMMON_MOST
    that ``rng`` draws, each clipped to the median of every upload's norm; another seed draws
    others (so a sender cannot know it is in)."""
    n = COMMON_MOST + 36
    deltas = {f"h{i:03d}": {"w": torch.tensor([float(i), 1.0])} for i in range(n)}
    names = sorted(deltas)
    norms = [math.hypot(i, 1.0) for i in range(n)]
    median = statistics.median(norms)
    drawn = sorted(random.Random(5).sample(names, COMMON_MOST))
    want = (
        sum(deltas[hk]["w"] * min(1.0, median / norms[names.index(hk)]) for hk in drawn)
        / COMMON_MOST
    )
    key, common = references(deltas, rng=random.Random(5))("h000")
    assert key == "common"
    assert torch.allclose(common["w"], want)
    assert not torch.allclose(references(deltas, rng=random.Random(6))("h000")[1]["w"], want)
    # At COMMON_MOST uploads or fewer, every one of them, whatever the rng
    few = {hk: deltas[hk] for hk in names[:COMMON_MOST]}
    assert torch.equal(
        references(few, rng=random.Random(5))("h000")[1]["w"],
        references(few, rng=random.Random(6))("h000")[1]["w"],
    )


def test_a_group_of_twins_enters_the_reference_once() -> None:
    deltas = {hk: {"w": torch.tensor([float(i), 1.0])} for i, hk in enumerate("abcd")}
    with_copy = {**deltas, "e": {"w": torch.tensor([0.0, 1.0])}}  # e copies a
    key, common = references(with_copy, {"a": "a", "e": "a"})("e")
    assert key == "common"
    assert torch.allclose(common["w"], references(deltas)("a")[1]["w"])
    # Below four groups, each upload's reference leaves its whole group out (equal norms here,
    # so no clipping).
    a, b = {"w": torch.tensor([0.0, 1.0])}, {"w": torch.tensor([1.0, 0.0])}
    loo = leave_one_out({"a": a, "b": b, "e": dict(a)}, {"a": "a", "e": "a"})
    assert torch.equal(loo("a")["w"], b["w"]) and torch.equal(loo("e")["w"], b["w"])
    assert torch.equal(loo("b")["w"], a["w"])
    assert leave_one_out({"a": a, "e": dict(a)}, {"a": "a", "e": "a"})("a") is None


def test_the_median_norm_is_set_by_real_uploads_of_miners_with_standing() -> None:
    def up(x: float) -> dict[str, torch.Tensor]:
        return {"w": torch.tensor([x, 0.0])}

    honest = {"a": up(1.0), "b": up(2.0)}
    # All-zero uploads never set the median: a flood of them cannot clip honest ones to nothing.
    zeros = AsMerged({**honest, **{f"z{i}": up(0.0) for i in range(5)}})
    assert zeros.scales == {"a": 1.0, "b": 0.75, **{f"z{i}": 1.0 for i in range(5)}}
    # Near-zero uploads from fresh hotkeys: the miners with standing set the median.
    tiny = {**honest, **{f"t{i}": up(1e-6) for i in range(5)}}
    assert AsMerged(tiny).scales["b"] == pytest.approx(1e-6 / 2.0)
    assert AsMerged(tiny, standing={"a", "b", "gone"}).scales["b"] == 0.75
    # Nobody with standing uploaded: every real upload counts; nothing real: nothing is clipped.
    assert AsMerged(honest, standing={"gone"}).scales == {"a": 1.0, "b": 0.75}
    assert AsMerged({"z": up(0.0)}).scales == {"z": 1.0}
    # The norms given are used as they are; a group of twins counts once.
    given = AsMerged({**honest, "c": up(3.0)}, norms={"a": 1.0, "b": 2.0, "c": 4.0})
    assert given.scales == {"a": 1.0, "b": 1.0, "c": 0.5}
    twinned = AsMerged({**honest, "c": up(2.0)}, twins={"b": "b", "c": "b"})
    assert twinned.scales == {"a": 1.0, "b": 0.75, "c": 0.75}
    assert torch.equal(twinned["c"]["w"], torch.tensor([1.5, 0.0]))
    # A near-zero copy that sorts first (its group's representative) stands in for nobody: a
    # group counts at its largest member, and miners with standing count as themselves.
    shadows = {**honest, "0a": up(1e-7), "0b": up(1e-7)}
    pairs = {"0a": "0a", "a": "0a", "0b": "0b", "b": "0b"}
    assert AsMerged(shadows, twins=pairs).scales["b"] == 0.75
    assert AsMerged(shadows, twins=pairs, standing={"a", "b"}).scales["b"] == 0.75


def test_probe_losses_match_evaluate_loss_and_leave_the_model_unchanged() -> None:
    model = build_model("tiny", vocab_size=VOCAB, seed=0)
    state = snapshot(model)
    probe = WindowProbe(model, state, batches)
    ids = list(range(16))
    losses = probe.losses(None, ids)
    assert sum(losses) / len(losses) == pytest.approx(evaluate_loss(model, batches(ids)), rel=1e-5)
    probe.losses({k: torch.ones_like(v) for k, v in state.items()}, ids)
    assert all(torch.equal(state[k], v) for k, v in snapshot(model).items())


@pytest.fixture(scope="module")
def trained():
    """Two honest miners on disjoint rows, from one model state."""
    torch.manual_seed(0)
    model = build_model("tiny", vocab_size=VOCAB, seed=0)
    state = snapshot(model)
    own = {"a": list(range(0, 32)), "b": list(range(64, 96))}
    deltas = {}
    for hk, ids in own.items():
        worker = build_model("tiny", vocab_size=VOCAB, seed=0)
        train_inner(worker, batches(ids * 4), InnerConfig(steps=16, micro_batch=8, lr=1e-2))
        deltas[hk] = pseudo_gradient(state, worker)
    return model, state, own, deltas


def test_honest_work_is_proven_and_a_copy_is_not(trained) -> None:
    model, state, own, deltas = trained
    deltas = {**deltas, "copier": {k: v.clone() for k, v in deltas["a"].items()}}
    own = {**own, "copier": list(range(128, 192))}
    probe = WindowProbe(model, state, batches)
    random_ids = list(range(192, 256))
    evaluations, _ = assess_window(probe, deltas, own, random_ids)
    spec = {ev.hotkey: ev.specific for ev in evaluations}
    assert spec["a"].proven(2.0) > 0 and spec["b"].proven(2.0) > 0
    assert spec["copier"].proven(2.0) == 0.0
    verdicts = score_window(evaluations, (), (), (), {}, {}, ScoringConfig())
    assert verdicts["copier"].score == 0.0 and verdicts["a"].score > 0


def test_the_copy_is_named_by_the_evidence_not_by_upload_order(trained) -> None:
    model, state, own, deltas = trained
    copy = {k: v.clone() for k, v in deltas["a"].items()}
    deltas = {"a": deltas["a"], "b": deltas["b"], "aaaa-copier": copy}  # sorts first
    own = {**own, "aaaa-copier": list(range(128, 192))}
    support = {hk: frozenset(range(10)) if hk != "b" else frozenset(range(50, 60)) for hk in deltas}
    matches = find_matches(7, support, {}, ScoringConfig())
    assert {(m.hotkey, m.source) for m in matches} == {("a", "aaaa-copier"), ("aaaa-copier", "a")}
    probe = WindowProbe(model, state, batches)
    _, fits = assess_window(probe, deltas, own, list(range(192, 256)), matches,
                            lambda m: own[m.source])  # fmt: skip
    assert judge_matches(matches, fits) == {"aaaa-copier": "a@7"}
    # A replay of a's update a window later, by a itself: fits its old samples, not its new.
    replay = Match("a", "a", 6, 1.0)
    _, fits = assess_window(probe, {"a": deltas["a"]}, {"a": list(range(128, 192))},
                            list(range(192, 256)), [replay], lambda m: own["a"])  # fmt: skip
    assert judge_matches([replay], fits) == {"a": "a@6"}


def test_an_upload_is_measured_as_merged_so_sending_it_bigger_buys_nothing(trained) -> None:
    model, state, own, deltas = trained
    worker = build_model("tiny", vocab_size=VOCAB, seed=0)
    own = {**own, "c": list(range(128, 160))}
    train_inner(worker, batches(own["c"] * 4), InnerConfig(steps=16, micro_batch=8, lr=1e-2))
    honest = {**deltas, "c": pseudo_gradient(state, worker)}
    norms = {hk: global_norm(d) for hk, d in honest.items()}
    # a sends 3 x its update: the median norm m is then the larger of b's and c's, and a is
    # measured exactly as if it had sent its update at norm m.
    median = max(norms["b"], norms["c"])
    assert 3 * norms["a"] > median
    inflated = {**honest, "a": {k: 3 * v for k, v in honest["a"].items()}}
    at_median = {**honest, "a": {k: v * (median / norms["a"]) for k, v in honest["a"].items()}}
    random_ids = list(range(192, 256))

    def measured(deltas, **kw):  # a fresh probe each time: a probe caches losses by reference
        probe = WindowProbe(model, state, batches)
        return assess_window(probe, deltas, own, random_ids, **kw)[0]

    got = {ev.hotkey: ev for ev in measured(inflated)}
    want = {ev.hotkey: ev for ev in measured(at_median)}
    assert got["a"].scale == pytest.approx(median / (3 * norms["a"]), rel=1e-6)
    assert want["a"].scale == pytest.approx(1.0)
    for hk in ("a", "b", "c"):
        assert got[hk].loss_after_assigned == pytest.approx(want[hk].loss_after_assigned, rel=1e-5)
        assert got[hk].specific.mean == pytest.approx(want[hk].specific.mean, rel=1e-3, abs=1e-7)
    # Given norms (a sparse codec's, from the payload) are used as they are.
    given = {**{hk: norms[hk] for hk in honest}, "a": 3 * norms["a"]}
    again = measured(inflated, norms=given)
    assert {ev.hotkey: ev.scale for ev in again} == pytest.approx(
        {ev.hotkey: ev.scale for ev in got.values()}, rel=1e-6
    )


def test_a_copier_does_not_lower_its_victim_s_evidence(trained) -> None:
    model, state, own, deltas = trained

    def probe():  # a fresh one per window: a probe caches losses by reference
        return WindowProbe(model, state, batches)

    random_ids = list(range(192, 256))
    alone = {ev.hotkey: ev for ev in assess_window(probe(), deltas, own, random_ids)[0]}
    copied = {**deltas, "copier": {k: v.clone() for k, v in deltas["a"].items()}}
    own_copied = {**own, "copier": list(range(128, 192))}
    support = {hk: frozenset(range(10)) if hk != "b" else frozenset(range(50, 60)) for hk in copied}
    matches = find_matches(3, support, {}, ScoringConfig())
    counted_twice = {
        ev.hotkey: ev for ev in assess_window(probe(), copied, own_copied, random_ids, matches,
                                              lambda m: own_copied[m.source])[0]
    }  # fmt: skip
    once = {
        ev.hotkey: ev for ev in assess_window(probe(), copied, own_copied, random_ids, matches,
                                              lambda m: own_copied[m.source],
                                              twins=twins(matches, 3))[0]
    }  # fmt: skip
    # Without twins the victim's own update sits in its reference and its excess shrinks; with
    # them the reference is what it was with no copier at all.
    assert counted_twice["a"].specific.mean < 0.9 * alone["a"].specific.mean
    assert once["a"].specific.mean == pytest.approx(alone["a"].specific.mean, rel=1e-4)
    assert once["b"].specific.mean == pytest.approx(alone["b"].specific.mean, rel=1e-4)
    assert once["copier"].specific.proven(2.0) == 0.0
