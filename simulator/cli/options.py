"""Options that several commands take, each defined once: one name, one meaning, one default.

The rules the names follow (README, "Command line"):

- an option is named for one value (``--layout``, ``--plan``, ``--strategy``, ``--hardware``); where a
  command takes several it takes a comma list (``--layout native,fp8``), never a plural name;
- a quantity with a unit says it as the scenario key does (``--duration-s`` for ``workload.duration_s``,
  ``--slo-ttft-p99-s`` for ``slo.ttft_p99_s``);
- ``--hardware`` is a node kind everywhere (``8xH100``; a GPU name alone is its largest node, ``H100``
  = ``8xH100``), ``--catalog`` an extra TOML file for the catalog the command reads, ``--model`` a
  catalog name or a config.json, defaulting to `DEFAULT_MODEL`.

An older spelling stays accepted, unlisted in ``--help`` (`Renamed`), so that scripts keep working.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hardware.catalog import DEFAULT_NODE, parse_prices
from simulator.cli.common import KvsimClickError
from simulator.errors import shown
from simulator.models import DEFAULT_MODEL, WEIGHT_PRECISIONS

if TYPE_CHECKING:
    from simulator.scenario import Scenario

Decorator = Callable[[Any], Any]

MODEL_HELP = "catalog name (see `kvsim models`) or path to a Hugging Face config.json"
HARDWARE_HELP = "node kind (see `kvsim hardware`; a GPU name alone is its largest node: H100 = 8xH100)"
LAYOUT_HELP = ("KV layout levers joined by '+': native, mha, mqa, gqa:N (N KV heads), mla[:rank], cross-layer[:f] "
               "(the fraction of layers that keep their own KV), compress[:ratio[:recent]] (one entry per ratio tokens "
               "beyond the recent ones), no-sliding, or a KV dtype (fp8, int8, int4, fp4; or bf16, fp16, fp32)")


class Renamed(click.Option):
    """An option whose first name is its name; the others are older spellings, still accepted but
    left out of ``--help`` and of error messages. Two spellings given with different values
    (``--duration 60 --duration-s 30``) are refused: neither is silently dropped."""

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        assert not (self.is_flag or self.multiple or self.count), self.opts  # one value, stored
        for opt in self.opts:  # each spelling its own list, so that `handle_parse_result` sees which were given
            parser.add_option(obj=self, opts=[opt], dest=f"{self.name}\0{opt}", action="append", nargs=self.nargs)

    def handle_parse_result(self, ctx: click.Context, opts: Any, args: list[str]) -> tuple[Any, list[str]]:
        given = [(opt, opts[f"{self.name}\0{opt}"][-1]) for opt in self.opts if f"{self.name}\0{opt}" in opts]
        if given:
            values = {opt: self.type_cast_value(ctx, value) for opt, value in given}
            if len(values) > 1 and len({repr(v) for v in values.values()}) > 1:
                shown_given = " and ".join(f"{opt} {shown(value)}" for opt, value in given)
                raise KvsimClickError(f"{self.opts[0]}: given twice with different values, as {shown_given} "
                                      f"({', '.join(self.opts[1:])}: its older spelling); give it once")
            opts = {**opts, str(self.name): given[-1][1]}
        return super().handle_parse_result(ctx, opts, args)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        names = self.opts
        self.opts = names[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = names

    def get_error_hint(self, ctx: click.Context | None) -> str:
        return f"'{self.opts[0]}'"


class PositiveFinite(click.ParamType):
    """A finite number > 0, and below `below` where given (click's FloatRange lets NaN through); anything else
    is one line naming the option, the value and the rule, exit 2."""

    name = "float"

    def __init__(self, below: float = math.inf, why: str = "") -> None:
        self.below, self.why = below, why  # an upper bound (open), and what it means

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and 0 < number < self.below):
            option = param.opts[0] if param is not None and param.opts else "value"
            rule = "> 0" if self.below == math.inf else f"in (0, {self.below:g}){self.why}"
            raise KvsimClickError(f"{option}: must be a finite number {rule} (got {shown(value)})")
        return number


class FiniteRange(click.FloatRange):
    """click's FloatRange without NaN, which compares false with both bounds and so passed them
    (``--warmup-fraction nan`` then failed inside as an internal class's rule)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{shown(value)} is not a number in the range {self._describe_range()}", param, ctx)
        return float(number)


def model_option(default: str | None = DEFAULT_MODEL) -> Decorator:
    """``--model``: a catalog name or a config.json (dest ``model_name``)."""
    return click.option("--model", "model_name", default=default, show_default=default is not None,
                        help=MODEL_HELP)


MODEL_CONFIG = click.option("--model-config", type=click.Path(path_type=Path),
                            help="Hugging Face config.json (overrides --model)")
HARDWARE = click.option("--hardware", default=DEFAULT_NODE, show_default=True, help=HARDWARE_HELP)
HARDWARE_CATALOG = click.option("--catalog", type=click.Path(path_type=Path),
                                help="extra hardware TOML file ([gpu.NAME] / [node.NAME] tables, as hardware/*.toml)")
WEIGHT_DTYPE = click.option("--weight-dtype", "--dtype", "weight_dtype", cls=Renamed,
                            type=click.Choice(WEIGHT_PRECISIONS),
                            help="weight precision to serve in (default: the model's as released)")
TRACE = click.option("--trace", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="replay this trace file instead of the scenario's workload")


def layout_option(several: bool = False, default: str = "native") -> Decorator:
    """``--layout``: one layout, or with `several` a comma list of them (older spelling ``--layouts``)."""
    if several:
        return click.option("--layout", "--layouts", "layouts", cls=Renamed, default=default, show_default=True,
                            help="layouts to draw, comma-separated (each as in `kvsim calc --layout`)")
    return click.option("--layout", default=default, show_default=True, help=LAYOUT_HELP)


def duration_option(help: str) -> Decorator:
    """``--duration-s`` (older spelling ``--duration``): seconds, finite and > 0 (dest ``duration_s``)."""
    return click.option("--duration-s", "--duration", "duration_s", cls=Renamed,
                        type=PositiveFinite(), help=help)


def seed_option(help: str, default: int | None = None) -> Decorator:
    """``--seed``: a seed >= 0."""
    return click.option("--seed", type=click.IntRange(min=0), default=default, show_default=default is not None,
                        help=help)


def plan_options(f: Any) -> Any:
    """``--tp --pp --dp-attention --ep``: a replica's parallelism plan (`simulator.placement`)."""
    f = click.option("--ep", type=click.IntRange(min=1), default=1, show_default=True,
                     help="expert parallelism of the routed experts (1: tensor-parallel experts)")(f)
    f = click.option("--dp-attention/--no-dp-attention", default=False, show_default=True,
                     help="attention data-parallel over the tp GPUs (each GPU its own sequences)")(f)
    f = click.option("--pp", type=click.IntRange(min=1), default=1, show_default=True, help="pipeline stages")(f)
    return TP(f)


TP = click.option("--tp", type=click.IntRange(min=1),
                  help="tensor parallelism per stage (default: all GPUs of the node)")


PRICE_OPTION = "--usd-per-gpu-hour"
USD_PER_GPU_HOUR = click.option(
    PRICE_OPTION, "usd_per_gpu_hour", metavar="USD|GPU=USD,...",
    help="price the GPUs at this many USD per GPU-hour instead of the catalog's: one figure for every GPU, or "
         "per GPU (H100=2.1,H200=3.4); replaces the scenario's cluster.usd_per_gpu_hour")


def priced(sc: Scenario, text: str | None) -> Scenario:
    """`sc` with ``--usd-per-gpu-hour`` `text` as its ``cluster.usd_per_gpu_hour`` (None: as it is);
    a bad figure or an unknown GPU is one line naming the option."""
    if text is None:
        return sc
    prices = parse_prices(text, PRICE_OPTION)
    sc.hardware_catalog().priced(prices, PRICE_OPTION)  # GPU names, against the scenario's own catalog
    return replace(sc, cluster=replace(sc.cluster, usd_per_gpu_hour=prices))
