"""The per-round lines and the summary a local room run prints, from members' records."""

from __future__ import annotations

from subnet.room.watch import round_line, round_of, summary

ROLES = {"holder": "holder", "miner1": "miner", "miner2": "miner", "validator1": "validator"}


def records(window: int, loss: float, merged: list[str]) -> dict[str, list[dict]]:
    """One window's records as the members' metrics files hold them (first record: hotkey)."""
    first = {n: {"event": "start", "hotkey": f"hk-{n}"} for n in ROLES}
    return {
        "holder": [
            first["holder"],
            {
                "event": "version",
                "window": window,
                "version": window + 1,
                "heldout_loss": loss,
                "contributors": {f"hk-{n}": 0.5 for n in merged},
                "tokens": 1000 * len(merged),
                "bytes_up": 300,
                "bytes_down": 7000,
            },
        ],
        "miner1": [
            first["miner1"],
            {
                "event": "train",
                "window": window,
                "loss": loss + 1,
                "bytes_up": 2000,
                "bytes_down": 100,
            },
        ],
        "miner2": [
            first["miner2"],
            {
                "event": "train",
                "window": window,
                "loss": loss + 2,
                "bytes_up": 2000,
                "bytes_down": 100,
            },
        ],
        "validator1": [
            first["validator1"],
            {"event": "scores", "window": window, "bytes_up": 50, "bytes_down": 4000},
        ],
    }


def test_a_round_says_loss_senders_merges_and_bytes_per_role():
    r = round_of(3, records(3, 5.5, ["miner1", "miner2"]), ROLES, lead="holder")
    assert r.heldout == 5.5 and r.train_loss == 7.0 and r.tokens == 2000
    assert r.sent == ["miner1", "miner2"] and r.scored == ["validator1"]
    assert r.merged == {"holder": ["miner1", "miner2"]}
    assert r.bytes == {"holder": (300, 7000), "miner": (4000, 200), "validator": (50, 4000)}
    line = round_line(r)
    assert line.startswith("round   3: held-out loss 5.5000; sent miner1, miner2")
    assert "scored by validator1" in line and "holder merged miner1, miner2" in line
    assert "miner 4.00 kB up/200 B down" in line, line


def test_a_round_of_other_windows_is_empty():
    r = round_of(9, records(3, 5.5, ["miner1"]), ROLES, lead="holder")
    assert r.empty and "no loss yet" in round_line(r) and "nothing merged" in round_line(r)


def test_the_summary_counts_merged_rounds_loss_and_tokens():
    rounds = [
        round_of(w, records(w, loss, ["miner1"]), ROLES, "holder")
        for w, loss in ((0, 6.0), (1, 5.0))
    ]
    rounds.append(round_of(2, records(1, 5.0, []), ROLES, "holder"))  # nothing in window 2
    lines = summary(rounds, seconds=10.0)
    assert lines[0] == "2 of 3 rounds merged"
    assert lines[1] == "held-out loss 6.0000 -> 5.0000 over the merged rounds"
    assert lines[2] == "trainers' loss 7.5000 -> 6.5000"
    assert lines[3] == "2,000 tokens merged, 200 tokens/s over 10 s"
    assert (
        summary(rounds, 10.0, start=7.0)[1]
        == "held-out loss 7.0000 at the start -> 5.0000 at the end"
    )


def test_a_ring_round_shows_who_mixed_whose_model():
    hk = {n: {"event": "plan", "hotkey": f"hk-{n}"} for n in ("w1", "w2")}
    mix = {"event": "mix", "window": 0}
    recs = {
        "w1": [hk["w1"], {**mix, "predecessor": "hk-w2", "weight": 0.5}],
        "w2": [hk["w2"], {**mix, "predecessor": "hk-w1", "weight": 0.0}],
    }
    r = round_of(0, recs, {"w1": "miner", "w2": "miner"}, lead="collector")
    assert r.merged == {"w1": ["w2"]} and r.sent == ["w2"]  # w1's model was unusable to w2
    assert "w1 merged w2" in round_line(r)


def test_a_merge_of_whole_models_counts_the_tokens_its_rounds_trained():
    """Gossip: workers train every round, the collector merges their final models once, and
    that merge counts no tokens of its own; the summary counts what the rounds trained."""
    hk = {n: {"event": "plan", "hotkey": f"hk-{n}"} for n in ("collector", "w1", "w2")}
    roles = {"collector": "holder", "w1": "miner", "w2": "miner"}

    def trained(name: str, window: int) -> dict:
        return {"event": "train", "window": window, "tokens": 500, "loss": 6.0 - window}

    recs = {name: [hk[name]] + [trained(name, w) for w in range(3)] for name in ("w1", "w2")}
    final = {"hk-w1": 0.5, "hk-w2": 0.5}
    recs["collector"] = [
        hk["collector"],
        {"event": "version", "window": 2, "version": 1, "contributors": final, "tokens": 0},
    ]
    rounds = [round_of(w, recs, roles, lead="collector") for w in range(3)]
    assert [r.trained_tokens for r in rounds] == [1000, 1000, 1000]
    assert summary(rounds, seconds=30.0)[-1] == "3,000 tokens merged, 100 tokens/s over 30 s"


def test_a_tree_round_names_the_nodes_that_reduced_children_only():
    hk = {n: {"event": "plan", "hotkey": f"hk-{n}"} for n in ("w1", "w2")}
    reduce = {"event": "reduce", "window": 0, "members": 1}
    recs = {
        "w1": [hk["w1"], {**reduce, "children": {"hk-w2": 1}, "members": 2}],
        "w2": [hk["w2"], {**reduce, "children": {}}],  # a leaf
    }
    r = round_of(0, recs, {"w1": "miner", "w2": "miner"}, lead="lead")
    assert r.merged == {"w1": ["w2"]} and "w2 merged" not in round_line(r)


def test_a_run_of_two_models_names_each_holders_loss():
    """two-models: both holders publish; the line names each model's loss, a round where only
    the second published names it, and the summary follows the second model apart."""
    hk = {n: {"event": "plan", "hotkey": f"hk-{n}"} for n in ("holder_a", "holder_b", "w1")}
    roles = {"holder_a": "holder", "holder_b": "holder", "w1": "miner"}

    def version(window: int, loss: float) -> dict:
        merged = {"contributors": {"hk-w1": 1.0}, "heldout_loss": loss, "tokens": 100}
        return {"event": "version", "window": window, "version": window + 1, **merged}

    recs = {
        "w1": [hk["w1"]],
        "holder_a": [hk["holder_a"], version(1, 8.5)],
        "holder_b": [hk["holder_b"], version(0, 8.9), version(1, 8.2)],
    }
    rounds = [round_of(w, recs, roles, lead="holder_a") for w in range(2)]
    assert round_line(rounds[0]).startswith("round   0: held-out loss 8.9000 (holder_b); sent w1")
    assert round_line(rounds[1]).startswith(
        "round   1: held-out loss 8.5000 (holder_a), 8.2000 (holder_b); sent w1"
    )
    lines = summary(rounds, 10.0, start=9.0)
    assert "holder_a's model: held-out loss 9.0000 at the start -> 8.5000 at the end" in lines
    assert "holder_b's model: held-out loss 8.9000 -> 8.2000" in lines
    # each model line counts its own merges: holder_a merged once, holder_b twice
    assert lines[0] == "rounds merged of 2: holder_a 1, holder_b 2"
