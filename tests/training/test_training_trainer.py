"""The miner's Trainer in one process: exactly train_inner, and --parallel.compile wraps once."""

from __future__ import annotations

import torch

from subnet.model import build_model, weights_digest
from subnet.training import InnerConfig, build_inner_optimizer, train_inner
from subnet.training import trainer as trainer_module
from subnet.training.parallel import ParallelConfig
from subnet.training.trainer import Trainer

CFG = InnerConfig(steps=2, micro_batch=2)


def _batches() -> list:
    s = torch.randint(0, 512, (2, 2, 17), generator=torch.Generator().manual_seed(3))
    return [(b[:, :-1], b[:, 1:]) for b in s]


def test_one_process_trainer_is_train_inner_bit_for_bit() -> None:
    a, b = build_model("tiny", seed=0), build_model("tiny", seed=0)
    ra = Trainer().train(a, _batches(), CFG, build_inner_optimizer(a, CFG))
    rb = train_inner(b, _batches(), CFG, build_inner_optimizer(b, CFG))
    assert (ra.tokens, ra.steps, ra.mean_loss) == (rb.tokens, rb.steps, rb.mean_loss)
    assert weights_digest(a) == weights_digest(b)


def test_compile_setting_compiles_the_model_once(monkeypatch) -> None:
    # A real torch.compile of `tiny` takes minutes on 2 busy cores (measured 124 s); this checks
    # the wiring: the compiled module is what trains, and it is built once per model.
    compiled: list[torch.nn.Module] = []

    def fake_compile(model: torch.nn.Module) -> torch.nn.Module:
        compiled.append(model)
        return model

    monkeypatch.setattr(trainer_module.torch, "compile", fake_compile)
    model = build_model("tiny", seed=0)
    opt = build_inner_optimizer(model, CFG)
    trainer = Trainer(ParallelConfig(compile=True))
    trainer.train(model, _batches(), CFG, opt)
    trainer.train(model, _batches(), CFG, opt)
    assert compiled == [model]
    assert Trainer(ParallelConfig(compile=False))._maybe_compiled(model) is model
