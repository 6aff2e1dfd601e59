"""The checks' dodgers of the adversarial benchmark and what it measures of them: the narrow
liar's lie (where it is, that the codec keeps it), the largest merge share, the draw's figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from benchmarks import adversarial, dodge_measures, draw_sim  # noqa: E402
from benchmarks.dodgers import NARROW_CHUNKS, NarrowLiar, narrow_targets  # noqa: E402

from subnet.compression import CompressionConfig, build_compressor  # noqa: E402
from subnet.compression.chunking import ChunkLayout  # noqa: E402

SHAPES = {"emb": (1024, 64), "w": (64, 64), "norm": (64,)}
HOTKEY = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"


def test_the_narrow_lie_is_a_fixed_direction_in_three_embedding_chunks() -> None:
    name, where, signs = narrow_targets(HOTKEY, SHAPES, 64)
    again = narrow_targets(HOTKEY, SHAPES, 64)
    assert name == "emb" and torch.equal(where, again[1]) and torch.equal(signs, again[2])
    layout = ChunkLayout.of(SHAPES[name], 64)
    marker = torch.zeros(1024 * 64)
    marker[where] = 1
    chunks, _ = layout.split(marker.reshape(SHAPES[name]))
    assert int((chunks.sum(dim=1) > 0).sum()) == NARROW_CHUNKS
    assert where.numel() == NARROW_CHUNKS * 64 and set(signs.tolist()) == {-1.0, 1.0}


def test_the_codec_sends_exactly_the_lie_in_its_chunks_and_the_honest_update_elsewhere() -> None:
    g = torch.Generator().manual_seed(0)
    delta = {k: torch.randn(s, generator=g) * 1e-3 for k, s in SHAPES.items()}
    liar = SimpleNamespace(rt=SimpleNamespace(hotkey=HOTKEY, cfg=SimpleNamespace(
        protocol=SimpleNamespace(compression=SimpleNamespace(chunk=64)))))  # fmt: skip
    sent = NarrowLiar.transform(liar, delta, 3)
    codec = build_compressor(CompressionConfig())
    decoded = codec.decode(codec.encode(sent), SHAPES)
    name, where, signs = narrow_targets(HOTKEY, SHAPES, 64)
    flat = decoded[name].reshape(-1)
    assert torch.equal(torch.sign(flat[where]), signs)  # every lie coordinate kept, its sign
    kept = flat.nonzero().squeeze(1)
    layout = ChunkLayout.of(SHAPES[name], 64)
    marker = torch.zeros_like(flat)
    marker[where] = 1
    lie_chunks = layout.split(marker.reshape(SHAPES[name]))[0].sum(dim=1) > 0
    in_lie = layout.split((flat != 0).float().reshape(SHAPES[name]))[0][lie_chunks].sum()
    assert int(in_lie) == where.numel()  # nothing else sent in those chunks
    assert kept.numel() > where.numel()  # the honest update everywhere else
    assert torch.equal(sent["w"], delta["w"])


def test_largest_share_is_over_the_accepted_uploads(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    records = [
        {"event": "uploads", "window": 3, "verdicts": dict.fromkeys("abcdefghij", "accepted")},
        {"event": "version", "window": 3, "contributors": {"a": 0.2}},
        {"event": "uploads", "window": 4, "verdicts": {"a": "accepted", "b": "missing"}},
        {"event": "version", "window": 4, "contributors": {"a": 1.0}},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    got = dodge_measures.largest_share(path)
    assert got["max_over_honest_share"] == 2.0 and got["window"] == 3


def test_the_draw_figures_and_their_targets() -> None:
    assert 3.4 < draw_sim.first_check(8, 0, trials=300) < 4.6  # N / K = 4 (8 senders, 2 places)
    cleared = draw_sim.probation_clears(8, trials=5)
    assert cleared["places"] == 2 and cleared["by_every_validator_max"] >= 8
    record = {"attacks": [], "attacked": {"groups": {"honest": {
        "validator_weight_share": [1.0, 1.0], "incentive": 1.0, "merge_weight_share_reported": 1.0}}},
        "dodgers": {"largest_share": {"max_over_honest_share": 2.4},
                    "narrow": {"narrow_drift_sd": 0.7},
                    "draw": {"windows_to_first_check": {"without_late_answerers": 5.1,
                             "with_8_late_answerers": 9.9, "n_over_k_without": 5.0,
                             "n_over_k_with": 9.0}}}}  # fmt: skip
    met = adversarial.targets(record)
    assert met["no_sender_above_2x_honest_share"] is False
    assert met["narrow_drift_le_1sd"] is True
    assert met["verified_liar_checked_within_n_over_k"] is False  # 9.9 > 9 x 1.05


def test_narrow_drift_is_measured_on_the_holders_state_files(tmp_path: Path) -> None:
    # Two run folders as the holder leaves them (its model under "model/"); the attacked one
    # moves the narrow liar's coordinates along its signs by 3 honest standard deviations.
    from safetensors.torch import save_file

    from subnet.model import build_model

    start = {
        k: v.detach().float() for k, v in build_model("tiny", vocab_size=1024).state_dict().items()
    }
    shapes = {k: tuple(v.shape) for k, v in start.items()}
    name, where, signs = narrow_targets(HOTKEY, shapes, 64)
    g = torch.Generator().manual_seed(1)
    clean = {k: v + 0.01 * torch.randn(v.shape, generator=g) for k, v in start.items()}
    attacked = {k: v.clone() for k, v in clean.items()}
    flat = attacked[name].reshape(-1)
    flat[where] += 0.03 * signs
    for root, model in (("attacked", attacked), ("clean", clean)):
        folder = tmp_path / root / "state" / "holder-x"
        folder.mkdir(parents=True)
        save_file(
            {f"model/{k}": v.contiguous() for k, v in model.items()},
            str(folder / "state.safetensors"),
        )
    out = dodge_measures.narrow_drift_sd(
        tmp_path / "attacked", tmp_path / "clean", HOTKEY, "tiny", 1024, 0, 64
    )
    assert 2.5 < out["narrow_drift_sd"] < 3.5, out
