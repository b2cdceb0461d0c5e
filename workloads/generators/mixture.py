"""mixture: several generators at once, each at a weighted share of its own load.

A component's ``weight`` multiplies that generator's arrival rate (``generator.scaled(w)``):
``{name = "chat-4k", weight = 0.5}`` is half the default chat load. Weights are not
normalised, because components count different things (chat sessions, agent tasks).
Each component draws from its own child generator (``rng.spawn``), so adding a component
does not change the others' streams. Session ids are renumbered to stay distinct.
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from simulator.errors import ConfigError, RuleError, at_key, must, placed, shown
from workloads.distributions import require_numbers
from workloads.generators import expected_requests, finalize, generator_from_dict, register_generator
from workloads.request import Request

# a mixture has no defaults (nothing says what to mix): what its errors say to give, and where
NEEDS_COMPONENTS = ("a mixture needs its components, in TOML: [workload] name = \"mixture\", components = "
                    "[{name = \"chat-4k\", weight = 0.7}, {name = \"code-repo-128k\", weight = 0.3}] (README: "
                    "kvsim workload)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Component:
    """One generator in a mixture, with its rate multiplier."""

    generator: Any
    weight: float = 1.0

    def __post_init__(self) -> None:
        must(0 < self.weight < math.inf, f"Component({self.generator.name})", "weight", "finite and > 0", self.weight)


@register_generator
@dataclass(frozen=True, slots=True, kw_only=True)
class Mixture:
    """A weighted mix of registered generators (built-in or user-defined).

    In a scenario: ``{name = "mixture", components = [{name = "chat-4k", weight = 0.7},
    {name = "code-repo-128k", weight = 0.3, n_teams = 4}]}``.
    """

    name: ClassVar[str] = "mixture"
    default_duration_s: ClassVar[float] = 600.0

    components: tuple[Component, ...]

    def __post_init__(self) -> None:
        must(len(self.components) >= 1, "Mixture", "components", "at least one", self.components)

    @classmethod
    def from_params(cls, params: dict[str, Any], where: str, base_dir: Path | None = None) -> Mixture:
        """From ``{components = [{name = ..., weight = ..., ...params}, ...]}``; `base_dir` resolves
        the components' relative paths."""
        unknown = sorted(set(params) - {"components"})
        if unknown:
            raise ConfigError(f"{at_key(where, unknown[0])}: unknown key (valid: name, components) "
                              f"(got {shown(params[unknown[0]])})")
        raw = params.get("components")
        if raw is None:
            raise ConfigError(f"{where}: 'components' is required: {NEEDS_COMPONENTS}")
        if not isinstance(raw, list | tuple) or not raw:
            raise ConfigError(f"{where}: 'components' must be a non-empty list of tables (got {shown(raw)})")
        comps = []
        for i, item in enumerate(raw):
            w = at_key(where, f"components[{i}]")
            if not isinstance(item, dict):
                raise ConfigError(f"{w}: must be a table {{name = ..., weight = ...}} (got {shown(item)})")
            spec = dict(item)
            weight = spec.pop("weight", 1.0)
            require_numbers({"weight": weight}, w)
            try:
                generator = generator_from_dict(spec, w, base_dir)
            except ConfigError as exc:  # an unknown key of the component's own table: name and weight are valid too
                own = re.match(rf"{re.escape(w)}\.[^.\[]+: unknown key \(valid: ", str(exc))
                raise (ConfigError(f"{own.group(0)}name, weight, {str(exc)[own.end():]}") if own else exc) from None
            try:
                comps.append(Component(generator=generator, weight=weight))
            except RuleError as exc:  # at its key, not the class's name
                raise placed(exc, w) from None
        return cls(components=tuple(comps))

    def expected_requests(self, duration_s: float) -> float:
        """The components' expected requests, each at its weight."""
        return sum(expected_requests(c.generator.scaled(c.weight), duration_s) for c in self.components)

    def scaled(self, factor: float) -> Mixture:
        """Every component's rate times `factor`."""
        return replace(self, components=tuple(replace(c, weight=c.weight * factor) for c in self.components))

    def generate(self, rng: np.random.Generator, duration_s: float) -> list[Request]:
        """Merge of the components' streams, arrival-ordered, ids and session ids renumbered."""
        streams: list[list[Request]] = []
        offset = 0
        for comp, child in zip(self.components, rng.spawn(len(self.components)), strict=True):
            reqs = comp.generator.scaled(comp.weight).generate(child, duration_s)
            n_sessions = 1 + max((r.session_id for r in reqs), default=-1)
            streams.append(
                [replace(r, session_id=r.session_id + offset) if r.session_id >= 0 else r for r in reqs]
            )
            offset += n_sessions
        return finalize(heapq.merge(*streams, key=lambda r: r.arrival_s))
