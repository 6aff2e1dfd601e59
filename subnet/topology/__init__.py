"""Topologies as data: versioned specs, templates that bind them, and the compiled run plan.

``load_spec("@beam/scored-subnet@2.0.0")`` reads a builtin spec from ``topologies/``;
``compile_plan(spec, template, roster, registries)`` checks it against the members and the code
that exists and returns an immutable, hashed ``RunPlan``, or raises ``PlanError`` with a reason
code before anything runs. Pure: no torch, no chain, no neuron imports (docs/topologies.md).
"""

from .compiler import Registries, compile_plan, registry_gaps, spec_vocabulary
from .errors import REASONS, PlanError
from .loader import builtin_specs, load_spec, load_spec_file, specs_dir
from .params import ParamSpec
from .plan import LanePlan, RunPlan, SlotPlan, StepPlan
from .spec import LaneSpec, RoleSpec, StepSpec, TopologySpec
from .template import Template, parse_ref, template_from_file

__all__ = [
    "REASONS",
    "LanePlan",
    "LaneSpec",
    "ParamSpec",
    "PlanError",
    "Registries",
    "RoleSpec",
    "RunPlan",
    "SlotPlan",
    "StepPlan",
    "StepSpec",
    "Template",
    "TopologySpec",
    "builtin_specs",
    "compile_plan",
    "load_spec",
    "load_spec_file",
    "parse_ref",
    "registry_gaps",
    "spec_vocabulary",
    "specs_dir",
    "template_from_file",
]
