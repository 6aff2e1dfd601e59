"""The inner loop: step and token accounting, accumulation, clipping, and one DiLoCo round."""

import math

import torch
from torch import nn
from torch.nn import functional as F

from subnet.model import build_model, evaluate_loss
from subnet.training import (
    InnerConfig,
    OuterConfig,
    build_inner_optimizer,
    build_outer_optimizer,
    load_parameters,
    pseudo_gradient,
    snapshot,
    train_inner,
)
from subnet.training.inner import warm_start


class Bigram(nn.Module):
    """The smallest language model with the Decoder's calling convention."""

    def __init__(self, vocab: int = 16) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(vocab, 8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, vocab)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.head(self.norm(self.emb(idx)))
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def _batches(n: int, batch: int = 4, seq: int = 8, vocab: int = 16, seed: int = 0) -> list:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randint(0, vocab, (batch, seq + 1), generator=gen)
        out.append((x[:, :-1], x[:, 1:]))
    return out


def test_counts_steps_tokens_and_loss() -> None:
    model = Bigram()
    result = train_inner(model, _batches(6), InnerConfig(steps=3, accumulation=2))
    assert (result.steps, result.tokens) == (3, 6 * 4 * 8)
    assert math.isfinite(result.mean_loss) and result.seconds > 0


def test_stops_at_the_last_whole_step_when_batches_run_out() -> None:
    result = train_inner(Bigram(), _batches(5), InnerConfig(steps=10, accumulation=2))
    assert (result.steps, result.tokens) == (2, 4 * 4 * 8)


def test_accumulation_equals_one_big_batch() -> None:
    small = _batches(6, batch=2)
    big = [
        (torch.cat([a[0], b[0]]), torch.cat([a[1], b[1]]))
        for a, b in zip(small[::2], small[1::2], strict=True)
    ]
    a, b = Bigram(), Bigram()
    train_inner(a, small, InnerConfig(steps=3, accumulation=2, grad_clip=0.5))
    train_inner(b, big, InnerConfig(steps=3, accumulation=1, grad_clip=0.5))
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)


def test_gradients_are_clipped_to_the_configured_norm() -> None:
    model = Bigram()
    start = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    sgd = torch.optim.SGD(model.parameters(), lr=1.0)  # step == -grad, so its norm is visible
    train_inner(model, _batches(1), InnerConfig(steps=1, grad_clip=0.01), optimizer=sgd)
    end = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert (start - end).norm() <= 0.01 * (1 + 1e-5)


def test_optimizer_state_carries_over_between_calls() -> None:
    model = Bigram()
    cfg = InnerConfig(steps=2)
    opt = build_inner_optimizer(model, cfg)
    train_inner(model, _batches(2), cfg, optimizer=opt)
    train_inner(model, _batches(2, seed=1), cfg, optimizer=opt)
    assert max(s["step"] for s in opt.state.values()) == 4
    decayed = {id(p) for p in opt.param_groups[0]["params"]}
    assert id(model.head.weight) in decayed and id(model.norm.weight) not in decayed


def test_bf16_autocast_runs() -> None:
    result = train_inner(Bigram(), _batches(2), InnerConfig(steps=2, bf16_autocast=True))
    assert result.steps == 2 and math.isfinite(result.mean_loss)


def test_pseudo_gradient_is_start_minus_end() -> None:
    model = Bigram()
    start = snapshot(model)
    train_inner(model, _batches(2), InnerConfig(steps=2))
    delta = pseudo_gradient(start, model)
    for name, p in model.named_parameters():
        torch.testing.assert_close(start[name] - delta[name], p.detach())
    load_parameters(model, start)
    assert all(torch.equal(p, start[n]) for n, p in model.named_parameters())


def test_one_diloco_round_on_the_tiny_decoder_lowers_held_out_loss() -> None:
    torch.manual_seed(0)
    vocab, seq = 512, 32

    # A learnable stream: the next token is the current one plus one, so there is signal to find.
    def stream(seed: int, n: int) -> list:
        gen = torch.Generator().manual_seed(seed)
        out = []
        for _ in range(n):
            x = (torch.randint(0, vocab, (4, 1), generator=gen) + torch.arange(seq + 1)) % vocab
            out.append((x[:, :-1], x[:, 1:]))
        return out

    global_model = build_model("tiny", seed=0)
    held_out = stream(99, 2)
    before = evaluate_loss(global_model, held_out)
    start = snapshot(global_model)
    outer = build_outer_optimizer(OuterConfig())
    deltas = []
    for worker in range(2):
        local = build_model("tiny", seed=0)
        load_parameters(local, start)
        train_inner(local, stream(worker, 10), InnerConfig(steps=10, lr=3e-3))
        deltas.append(pseudo_gradient(start, local))
    mean = {n: (deltas[0][n] + deltas[1][n]) / 2 for n in start}
    params = dict(global_model.named_parameters())
    outer.step(params, mean)
    assert evaluate_loss(global_model, held_out) < before - 0.1


def test_a_fresh_adamw_starts_from_the_first_squared_gradient() -> None:
    model = Bigram()
    cfg = InnerConfig(steps=1, moment_init=40.0, moment_floor=0.0, grad_clip=0.0)  # no floor
    opt = build_inner_optimizer(model, cfg)
    ((x, y),) = _batches(1)
    _, loss = model(x, y)
    loss.backward()
    grads = {id(p): p.grad.clone() for p in model.parameters()}
    model.zero_grad()
    train_inner(model, [(x, y)], cfg, optimizer=opt)
    b2 = cfg.betas[1]
    for p in model.parameters():
        g = grads[id(p)]
        # one step of AdamW's own update from v0 = 40 g^2: v1 = b2 v0 + (1 - b2) g^2
        torch.testing.assert_close(opt.state[p]["exp_avg_sq"], (40 * b2 + 1 - b2) * g.pow(2))
        assert float(opt.state[p]["step"]) == 1


def test_the_warm_start_damps_the_first_steps_and_leaves_a_kept_state_alone() -> None:
    moved = {}
    for factor in (0.0, 40.0):
        model = Bigram()
        start = snapshot(model)
        train_inner(model, _batches(1), InnerConfig(steps=1, moment_init=factor))
        moved[factor] = sum(float(d.abs().sum()) for d in pseudo_gradient(start, model).values())
    # AdamW's zero start moves every coordinate by about lr; v0 = 40 g^2 by about lr / 6.3
    assert moved[40.0] < moved[0.0] / 4
    model = Bigram()
    cfg = InnerConfig(steps=1, moment_init=40.0)
    opt = build_inner_optimizer(model, cfg)
    train_inner(model, _batches(1), cfg, optimizer=opt)
    kept = {id(p): s["exp_avg_sq"].clone() for p, s in opt.state.items()}
    train_inner(model, _batches(1, seed=1), cfg.model_copy(update={"moment_init": 1e6}), opt)
    for p, s in opt.state.items():  # a kept state is continued, never warm-started again
        assert float(s["exp_avg_sq"].max()) < 10 * float(kept[id(p)].max()) + 1e-3


def test_the_warm_start_floor_raises_only_the_coordinates_below_it() -> None:
    weight = torch.nn.Parameter(torch.zeros(4))
    weight.grad = torch.tensor([1.0, 0.0, 1e-4, 2.0])
    for floor, expected in ((0.0, [10.0, 0.0, 1e-7, 40.0]), (0.1, [10.0, 1.25, 1.25, 40.0])):
        opt = torch.optim.AdamW([weight], lr=1e-3)
        warm_start(opt, 10.0, floor)  # mean of 10 g^2 is 12.5; a tenth of it is 1.25
        torch.testing.assert_close(opt.state[weight]["exp_avg_sq"], torch.tensor(expected))
