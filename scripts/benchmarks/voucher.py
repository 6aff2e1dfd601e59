"""A validator that vouches falsely (the adversarial benchmark's; never part of ``subnet/``): it
runs as an honest validator, but every notice it writes also says that its accomplices' uploads
passed a check, for the window of the notice (the latest a notice may name), and its reports
score them high. What it can buy them at the honest validators: probation's end, nothing more
(docs/protocol.md, "What one validator's notice can change at another").

    python scripts/benchmarks/voucher.py --accomplices HK1,HK2 [validator flags]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from subnet.kernels import pin  # noqa: E402

pin()  # the kernels every neuron replays on, before torch loads

from subnet.neuron.checks import Checker  # noqa: E402
from subnet.neuron.validator import ScoreReport, Validator  # noqa: E402
from subnet.node.entry import run_role  # noqa: E402
from subnet.wire.schema import MAX_VERDICTS, CheckVerdict  # noqa: E402


class VouchingChecker(Checker):
    """Adds a pass for every accomplice, as of the notice's window, to each notice."""

    accomplices: tuple[str, ...] = ()

    def notice(self, window: int, committed: list[str]) -> None:
        lies = [CheckVerdict(window, hk, "pass", 0.0) for hk in self.accomplices]
        ledger = self.ledger  # the verdicts the notice reports (``check_ledger``)
        ledger.results = [r for r in ledger.results if r.hotkey not in self.accomplices]
        ledger.results = [*ledger.results[-(MAX_VERDICTS - len(lies)) :], *lies]
        super().notice(window, committed)


class Voucher(Validator):
    """An honest validator but for its notices and its accomplices' scores."""

    accomplices: tuple[str, ...] = ()

    def __init__(self, rt) -> None:
        super().__init__(rt)
        self.checker.__class__ = VouchingChecker
        self.checker.accomplices = self.accomplices

    def step(self, window: int) -> ScoreReport:
        report = super().step(window)
        best = max(report.scores.values(), default=0.0) or 0.01
        for hk in self.accomplices:
            if hk in report.scores:
                report.scores[hk] = 2 * best
        return report


def main() -> int:
    i = sys.argv.index("--accomplices")
    accomplices = tuple(h for h in sys.argv[i + 1].split(",") if h)
    del sys.argv[i : i + 2]
    role = type("Voucher", (Voucher,), {"accomplices": accomplices, "role": "validator"})
    return run_role(role, "a validator that vouches falsely (benchmarks and tests only)")


if __name__ == "__main__":
    sys.exit(main())
