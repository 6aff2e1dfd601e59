"""The persistence guard: honest senders pass whole, a lie kept to a few chunks is held to
what the median sender pushes there, and the guard survives a restart."""

from __future__ import annotations

import torch

from subnet.training.guard import PersistenceGuard, _largest_within

SHAPES = {"emb": (256, 64), "w": (64, 64), "norm": (64,)}  # 4 + 1 blocks of 64 x 64, a tail


def _honest(g: torch.Generator, density: float = 0.02) -> dict[str, torch.Tensor]:
    """A sparse update in random positions and signs, as top-k of error feedback looks."""
    out = {}
    for name, shape in SHAPES.items():
        values = torch.randn(shape, generator=g)
        keep = torch.rand(shape, generator=g) < density
        out[name] = values * keep
    return out


def _rows(update: dict[str, torch.Tensor]) -> torch.Tensor:
    return update["emb"][:64].reshape(-1)  # the first block of the embedding: the lie's chunk


def test_largest_within_known_answers() -> None:
    old = torch.tensor([[0.0, 0.0], [3.0, 0.0], [3.0, 0.0], [0.0, 0.0]])
    new = torch.tensor([[4.0, 0.0], [1.0, 0.0], [-2.0, 0.0], [0.0, 0.0]])
    bound = torch.tensor([2.0, 2.0, 2.0, 1.0])
    f = _largest_within(old, new, bound)
    # 0 + 4f <= 2 -> 0.5; 3 + f > 2 always -> 0; 3 - 2f <= 2 -> f in [0.5, 2.5] -> 1; no update -> 1
    assert torch.allclose(f, torch.tensor([0.5, 0.0, 1.0, 1.0]))


def test_honest_senders_are_almost_never_scaled_and_a_narrow_lie_is_held() -> None:
    g = torch.Generator().manual_seed(0)
    guard = PersistenceGuard(SHAPES, 64, seed=1)
    lie = torch.zeros(64 * 64)
    lie[torch.randperm(64 * 64, generator=g)[:64]] = 2.5  # a fixed direction in one chunk
    merged_lie = torch.zeros(64 * 64)
    honest_scaled = total = 0
    for _ in range(40):
        ups = {f"h{i}": _honest(g) for i in range(9)}
        liar = _honest(g)
        liar["emb"][:64] = lie.reshape(64, 64)
        ups["liar"] = liar
        factors = guard.factors({hk: guard.sketch(u) for hk, u in ups.items()})
        for hk in ups:
            if hk != "liar":
                honest_scaled += int((factors[hk] < 1).sum())
                total += factors[hk].numel()
        merged_lie += _rows(guard.scale(liar, factors["liar"]))
    assert honest_scaled / total < 0.01
    # Unguarded the lie would have moved its chunk by 40 x |lie|; held, by about what decays
    # per window out of a bound of twice the median sender's persistent push.
    along = float(merged_lie @ lie) / float(lie @ lie)
    assert along < 12.0, along


def test_the_guard_restarts_where_it_stopped() -> None:
    g = torch.Generator().manual_seed(2)
    first = PersistenceGuard(SHAPES, 64, seed=5)
    for _ in range(3):
        first.factors({f"h{i}": first.sketch(_honest(g)) for i in range(4)})
    again = PersistenceGuard(SHAPES, 64)
    again.load_state_dict(first.state_dict())
    ups = {f"h{i}": _honest(g) for i in range(4)}
    a = first.factors({hk: first.sketch(u) for hk, u in ups.items()})
    b = again.factors({hk: again.sketch(u) for hk, u in ups.items()})
    assert all(torch.equal(a[hk], b[hk]) for hk in ups)


def test_scale_multiplies_each_chunk_by_its_factor() -> None:
    guard = PersistenceGuard(SHAPES, 64, seed=0)
    update = {name: torch.ones(shape) for name, shape in SHAPES.items()}
    f = torch.ones(guard.chunks)
    f[1] = 0.25  # the embedding's second 64 x 64 block (rows 64 - 127)
    out = guard.scale(update, f)
    assert torch.equal(out["emb"][64:128], torch.full((64, 64), 0.25))
    assert float(out["emb"].sum()) == 256 * 64 - 0.75 * 64 * 64
    assert out["w"] is update["w"] and out["norm"] is update["norm"]
