"""Subnet mode's run plan: the builtin subnet template, bound to this network's protocol config."""

from __future__ import annotations

from ..config import ProtocolConfig
from ..membership import Roster
from ..neuron.registry import REGISTRIES
from ..topology import RunPlan, Template, compile_plan, load_spec, specs_dir, template_from_file


def subnet_template(protocol: ProtocolConfig) -> Template:
    """``topologies/templates/subnet.toml`` with the protocol config's hash as its parameter."""
    base = template_from_file(specs_dir() / "templates" / "subnet.toml")
    return Template(
        topology=base.topology, params={**base.params, "protocol": protocol.config_hash()}
    )


def subnet_plan(protocol: ProtocolConfig, roster: Roster) -> RunPlan:
    """Compile the subnet topology for ``roster``; PlanError (with its reason) if it cannot run."""
    template = subnet_template(protocol)
    return compile_plan(load_spec(template.topology), template, roster, REGISTRIES)
