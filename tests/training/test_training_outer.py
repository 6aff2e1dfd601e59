"""Outer optimizers: hand-computed known answers and agreement with torch.optim.SGD."""

import pytest
import torch

from subnet.training import OuterConfig, OuterSGD, build_outer_optimizer


def test_nesterov_two_steps_known_answer() -> None:
    # lr 0.7, mu 0.9.  Step 1: b = g1 = [1, -2]; step = g1 + 0.9 b = [1.9, -3.8];
    # p = -0.7 * step = [-1.33, 2.66].  Step 2: g2 = [0.5, 1]; b = 0.9 [1, -2] + g2 = [1.4, -0.8];
    # step = g2 + 0.9 b = [1.76, 0.28]; p = [-1.33 - 1.232, 2.66 - 0.196] = [-2.562, 2.464].
    opt = build_outer_optimizer(OuterConfig())
    params = {"w": torch.zeros(2)}
    opt.step(params, {"w": torch.tensor([1.0, -2.0])})
    torch.testing.assert_close(params["w"], torch.tensor([-1.33, 2.66]))
    opt.step(params, {"w": torch.tensor([0.5, 1.0])})
    torch.testing.assert_close(params["w"], torch.tensor([-2.562, 2.464]))
    torch.testing.assert_close(opt.state_dict()["w"], torch.tensor([1.4, -0.8]))


def test_plain_sgd_known_answer() -> None:
    opt = build_outer_optimizer(OuterConfig(name="sgd", lr=0.5))
    params = {"w": torch.tensor([1.0, 1.0])}
    opt.step(params, {"w": torch.tensor([2.0, -4.0])})
    opt.step(params, {"w": torch.tensor([2.0, -4.0])})
    torch.testing.assert_close(params["w"], torch.tensor([-1.0, 5.0]))
    assert opt.state_dict() == {}


def test_fedavg_lands_on_the_average_of_the_workers() -> None:
    start = torch.tensor([1.0, 2.0, 3.0])
    workers = [torch.tensor([0.0, 2.0, 5.0]), torch.tensor([2.0, 4.0, 3.0])]
    mean_delta = sum(start - w for w in workers) / 2
    params = {"w": start.clone()}
    build_outer_optimizer(OuterConfig(name="fedavg")).step(params, {"w": mean_delta})
    torch.testing.assert_close(params["w"], torch.tensor([1.0, 3.0, 4.0]))


@pytest.mark.parametrize("nesterov", [True, False])
def test_matches_torch_sgd(nesterov: bool) -> None:
    gen = torch.Generator().manual_seed(0)
    p_ref = torch.nn.Parameter(torch.randn(10, generator=gen))
    params = {"w": p_ref.detach().clone()}
    ref = torch.optim.SGD([p_ref], lr=0.7, momentum=0.9, nesterov=nesterov)
    ours = OuterSGD(0.7, 0.9, nesterov=nesterov)
    for _ in range(5):
        g = torch.randn(10, generator=gen)
        p_ref.grad = g.clone()
        ref.step()
        ours.step(params, {"w": g})
    torch.testing.assert_close(params["w"], p_ref.detach(), rtol=0, atol=1e-6)


def test_resume_from_state_dict_continues_identically() -> None:
    grads = [{"w": torch.tensor([1.0, -1.0])}, {"w": torch.tensor([0.3, 2.0])}]
    straight = build_outer_optimizer(OuterConfig())
    p1 = {"w": torch.zeros(2)}
    for g in grads:
        straight.step(p1, g)
    first = build_outer_optimizer(OuterConfig())
    p2 = {"w": torch.zeros(2)}
    first.step(p2, grads[0])
    resumed = build_outer_optimizer(OuterConfig())
    resumed.load_state_dict(first.state_dict())
    resumed.step(p2, grads[1])
    assert torch.equal(p1["w"], p2["w"])


def test_config_rejects_unknown_keys_and_names() -> None:
    with pytest.raises(ValueError):
        OuterConfig(name="adam")
    with pytest.raises(ValueError):
        OuterConfig(learning_rate=1.0)
