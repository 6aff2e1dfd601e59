"""A metagraph as a plain-text table, for operators' terminals and the demo."""

from __future__ import annotations

import bittensor as bt


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def format_metagraph(graph: bt.Metagraph, names: dict[str, str] | None = None) -> str:
    """uid, name, hotkey, stake, permit, incentive, dividends and commitment per neuron."""
    names = names or {}
    header = (
        f"netuid {graph.netuid} at block {graph.block}: {len(graph.neurons)} neurons, "
        f"tempo {graph.tempo}, {len(graph.validators)} validator permits"
    )
    cols = f"{'uid':>3}  {'name':<11} {'hotkey':<14} {'stake':>10} {'vpermit':>7} "
    cols += f"{'incentive':>9} {'dividends':>9}  commitment"
    rows = [header, cols, "-" * len(cols)]
    for n in graph.neurons:
        commitment = n.commitment.value if n.commitment is not None else None
        rows.append(
            f"{n.uid:>3}  {_short(names.get(n.hotkey, ''), 11):<11} {_short(n.hotkey, 14):<14} "
            f"{n.total_stake.rao / 1e9:>10.2f} {('yes' if n.validator_permit else 'no'):>7} "
            f"{n.incentive:>9.4f} {n.dividends:>9.4f}  {_short(commitment or '-', 60)}"
        )
    return "\n".join(rows)
