"""The one error the topology layer raises: a plan that cannot run, with a reason code."""

from __future__ import annotations

# Every reason a spec, template or plan is refused; tests and callers match on these codes.
REASONS = frozenset(
    {
        "bad_reference",  # a topology reference that is not "@scope/name@X.Y.Z"
        "unknown_topology",  # no spec of that name
        "unknown_version",  # the name exists, that exact version does not
        "bad_spec",  # a spec file that does not parse or contradicts itself
        "bad_template",  # a template file that does not parse
        "bad_parameter",  # an unknown template parameter, or one of the wrong type or range
        "role_unfilled",  # fewer members in a slot than the spec's minimum
        "role_overfilled",  # more members in a slot than the spec's maximum
        "unknown_slot",  # a roster member in a slot the spec does not have
        "missing_permission",  # a member without a permission its slot requires
        "lane_unread",  # a lane with no reader (in the spec, or no member fills a reader slot)
        "lane_unwritten",  # a lane with no writing step (in the spec, or no writer member)
        "unknown_action",  # a step action missing from its role class's registry
        "unknown_param",  # a step params key its action does not read (a misspelling)
        "unknown_gate",  # a gate missing from the gate registry
        "unknown_rule",  # a merge-weights, data, aggregation, outer or stop rule not registered
    }
)


class PlanError(ValueError):
    """A topology spec, template or plan that cannot run.

    ``reason`` is a short code from ``REASONS``; the message is one line naming the thing that is
    wrong (the slot, lane, parameter, member ...) and, where there is one, the fix.
    """

    def __init__(self, reason: str, message: str) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown PlanError reason {reason!r}")
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
