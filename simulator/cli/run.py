"""Scenario commands: ``run`` (simulate and write the report) and ``capacity`` (size fleets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pandas as pd

from hardware.catalog import price_note
from simulator.cli.common import (
    OUTPUTS,
    OutPath,
    OutputFolder,
    comma_items,
    echo_json,
    handle_errors,
    note,
    on_command_line,
    records,
    stopped_cleanly,
    warn,
)
from simulator.cli.options import (
    TRACE,
    USD_PER_GPU_HOUR,
    FiniteRange,
    PositiveFinite,
    Renamed,
    duration_option,
    priced,
    seed_option,
)
from simulator.cli.progress import phase_bars, progress_bar
from simulator.errors import ConfigError, shown
from simulator.limits import MAX_STREAMED_REQUESTS
from simulator.scenario import Scenario, default_tp_notes, load_scenario
from simulator.units import figure

SCENARIO_ARG = click.argument("scenario", required=False, type=click.Path(path_type=Path))


def _say_prices(sc: Scenario) -> None:
    """The GPU prices the fleets run at (`price_note`), and a note for each price given for a GPU none runs on."""
    click.echo(price_note(sc.priced_nodes()), err=True)
    for gpu in sc.unused_prices():
        note(f"{gpu} is priced (cluster.usd_per_gpu_hour or --usd-per-gpu-hour), but no fleet here runs on it")


def _echo_table(df: pd.DataFrame) -> None:
    """`df` as text, its floats as `figure` writes them (a column its ``attrs[SLO_LIMITS]`` judges against an SLO, a
    headline's p99, as `figure_against` does: on its side of the SLO) and a figure none was measured for as ``n/a``
    (helper-156: an offline run too short for a steady window printed ``NaN`` req/s)."""
    from simulator.study import slo_figures

    against = slo_figures(df, "n/a")
    shown = df.copy()
    for c, figures in against.items():
        shown[c] = figures
    # such a column is laid out as pandas lays out a float one: one space wider than its header, or as wide as its
    # widest figure (the demo's table as before, character for character)
    click.echo(shown.to_string(index=False, float_format=figure, na_rep="n/a",
                               col_space={c: max(len(c) + 1, *map(len, v)) for c, v in against.items()}))


@click.command("run")
@SCENARIO_ARG
@click.option("--out", type=OutPath(), default=Path("report"), show_default=True, help="report folder")
@seed_option("override the scenario's seed")
@TRACE
@USD_PER_GPU_HOUR
@click.option("--json", "as_json", is_flag=True, help="print each fleet's summary (and the capacity plan) as JSON")
@click.option("--stream", is_flag=True,
              help=f"write each fleet's requests.csv and timeseries.csv as the run goes instead of holding every "
                   f"record (a trace of up to {MAX_STREAMED_REQUESTS:,} requests; the rows in the order requests end)")
@handle_errors
def run_cmd(scenario: Path | None, out: Path, seed: int | None, trace: Path | None, usd_per_gpu_hour: str | None,
            as_json: bool, stream: bool = False) -> None:
    """Simulate SCENARIO (default: scenarios/default.toml) and write its report folder.

    SCENARIO is a file or the name of a shipped one (`kvsim run capacity-plan`). With --stream,
    the report folder's earlier files are removed once the workload is read and checked, as the run
    starts writing, not once it is done; a trace over 2,000,000 requests then needs report.capacity
    and report.breakeven off (they hold the requests).
    """
    from simulator.planning import plan_capacity
    from simulator.report import write_report
    from simulator.study import run_scenario
    from workloads.workload import say_left_out

    # with --trace: the whole trace unless the scenario sets duration_s; a note when it changes the replay
    sc = load_scenario(scenario, trace=trace, say=note)
    sc = priced(sc, usd_per_gpu_hour)
    for line in default_tp_notes(sc):
        note(line)
    folder = OutputFolder(out, "run")
    folder.prepare(_report_names(sc, ()))  # a bad --out fails now, not after the simulation; nothing is removed yet
    click.echo(f"scenario {sc.name}" + (f": {sc.description}" if sc.description else ""), err=True)
    _say_prices(sc)

    def before_writing(fleets: list[str]) -> None:  # --stream: the workload read and checked, the run writes
        folder.clear(_report_names(sc, fleets))

    with stopped_cleanly("run", folder):
        try:
            with progress_bar("simulating") as bar:
                result = run_scenario(sc, seed, progress=bar, stream_to=out if stream else None,
                                      before_writing=before_writing if stream else None)
            plan = None
            if sc.report.capacity:
                with progress_bar("capacity search") as bar:
                    plan = plan_capacity(sc, seed=seed, on_step=bar.note, progress=bar)
            if not stream:
                folder.clear(_report_names(sc, result.results))  # the inputs held: the previous report goes now
            with phase_bars() as phases:
                write_report(result, out, plan, phases=phases)
        except Exception:  # a streamed run's files, or a report cut short, are no report: removed, as an
            folder.discard()  # interrupt removes them (nothing, when the command failed before writing)
            raise
        folder.finish()
    # the trace rows the replay skipped, if any (the report says so too): never dropped silently
    say_left_out(result.workload, warn)
    for hw, r in result.results.items():
        if r.summary["steady_state_warning"]:
            warn(f"{hw}: {r.summary['steady_state_warning']}")
        if r.summary["rejected"]:  # the SLO verdict is "no" for it; say why
            from simulator.planning import rejected_note

            warn(f"{hw}: {rejected_note(r)}")
    if as_json:  # the fleets' summaries (snake_case figures, as summary.json holds them) and the plan
        echo_json({"fleets": {hw: r.summary for hw, r in result.results.items()},
                   "capacity": records(plan) if plan is not None else None, "report": str(out / "summary.md")})
        return
    _echo_table(result.headline())
    if plan is not None:
        click.echo()
        cols = ["hardware", *(["fleet"] if "fleet" in plan else []), "nodes", "memory_floor_nodes", "usd_per_hour",
                "usd_per_million_output_tokens", "binding", "headroom_scale"]
        _say_plan_notes(plan)
        _echo_table(_headroom_shown(plan)[cols])
    click.echo(f"report written to {out / 'summary.md'}")


@click.command("capacity")
@SCENARIO_ARG
@click.option("--slo-ttft-p99-s", "--slo-ttft-p99", "slo_ttft_p99", cls=Renamed, type=PositiveFinite(),
              help="p99 time to first token, seconds (default: the scenario's slo.ttft_p99_s)")
@click.option("--slo-tpot-p99-s", "--slo-tpot-p99", "slo_tpot_p99", cls=Renamed, type=PositiveFinite(),
              help="p99 time per output token, seconds (default: the scenario's slo.tpot_p99_s)")
@click.option("--hardware", help="node kinds, comma-separated (default: the scenario's), e.g. H100,H200,B200")
@seed_option("override the scenario's seed")
@TRACE
@USD_PER_GPU_HOUR
@click.option("--out", type=OutPath(), help="write capacity.csv and capacity.png here")
@click.option("--max-rate", is_flag=True, help="instead: the highest rate the scenario's fleet sustains at the SLOs")
@click.option("--offline", is_flag=True, help="instead: throughput with every request arriving at t = 0")
@click.option("--seeds", type=click.IntRange(min=1),
              help="run each fleet at this many seeds from --seed on (each its own workload draw): a node count "
                   "must meet the SLOs at every one (default 1; 3 with --max-rate/--offline, which repeat over them)")
@click.option("--rel-tol", type=PositiveFinite(1, ": a share, 0.05 for 5%"), default=0.05, show_default=True,
              help="--max-rate only: bisect until the bracket's hi/lo ≤ 1 + this (0.05: 5%)")
@duration_option("seconds of arrivals a run, in every mode (default: the scenario's workload.duration_s)")
@click.option("--warmup-fraction", type=FiniteRange(min=0, max=0.5), default=0.1, show_default=True,
              help="--max-rate/--offline only: steady window, least share of the run left out as warm-up")
@click.option("--json", "as_json", is_flag=True, help="print the answer as JSON")
@handle_errors
def capacity_cmd(scenario: Path | None, slo_ttft_p99: float | None, slo_tpot_p99: float | None,
                 hardware: str | None, seed: int | None, trace: Path | None, usd_per_gpu_hour: str | None,
                 out: Path | None,
                 max_rate: bool = False, offline: bool = False, seeds: int | None = None, rel_tol: float = 0.05,
                 duration_s: float | None = None, warmup_fraction: float = 0.1, as_json: bool = False) -> None:
    """The smallest fleet of each node kind that meets the SLOs at SCENARIO's load (with a
    [disaggregation] section: the smallest aggregated and xPyD fleets side by side).

    With --max-rate: for the scenario's fleets (each node kind × cluster.nodes, and its xPyD fleet with
    [disaggregation]), the highest arrival
    rate that meets the SLOs, by bisection over seeds; with --offline: the throughput when every
    request arrives at once. Both report sustained figures over the steady-state window.
    --warmup-fraction applies only to them, --rel-tol only to --max-rate: given without, they are
    refused. --seeds N sizes each fleet to meet the SLOs at N seeds (N times the runs at most), so that no
    one seed's luck decides a count.
    """
    from dataclasses import replace

    _refuse_mode_options(max_rate, offline)

    from simulator.charts import capacity_figure, close_figure
    from simulator.maxrate import DEFAULT_SEEDS
    from simulator.planning import plan_capacity

    sc = priced(load_scenario(scenario, trace=trace, say=note), usd_per_gpu_hour)
    folder = OutputFolder(out, "capacity") if out else None
    names = ({"max_rate.csv"} if max_rate else set()) | ({"offline.csv"} if offline else set())
    if folder:
        # a bad --out fails now; its earlier files are removed only right before writing
        folder.prepare(names or {"capacity.csv", "capacity.png"})
    kinds = None
    if duration_s is not None:  # every mode runs the scenario's workload for this long
        sc = replace(sc, workload=replace(sc.workload, duration_s=duration_s))
    if hardware is not None:
        sc = _with_hardware(sc, hardware)
    if hardware is not None or duration_s is not None:
        sc.validate()
    if hardware is not None:
        kinds = [n.key for n in sc.nodes()]
    for line in default_tp_notes(sc):  # of the kinds this search runs
        note(line)
    _say_prices(sc)
    if seeds and seeds > 1 and sc.workload.trace:  # a trace is one draw (helper-149; --max-rate's too, helper-156)
        note(f"--seeds {seeds}: a trace is the same requests at every seed; only the engine's seed differs (a "
             "random router's draws), so each fleet reruns one workload")
    with stopped_cleanly("capacity", folder):
        if max_rate or offline:
            _max_rate_mode(sc, kinds or [n.key for n in sc.nodes()], max_rate=max_rate, offline=offline,
                           seeds=DEFAULT_SEEDS if seeds is None else seeds,
                           seed=seed, rel_tol=rel_tol, ttft=slo_ttft_p99, tpot=slo_tpot_p99, duration=duration_s,
                           warmup_fraction=warmup_fraction, as_json=as_json, folder=folder)
            if folder:
                folder.finish()
            return
        with progress_bar("capacity search") as bar:
            plan = plan_capacity(sc, hardware=kinds, ttft_p99_s=slo_ttft_p99, tpot_p99_s=slo_tpot_p99, seed=seed,
                                 seeds=seeds or 1, on_step=bar.note, progress=bar)
        if as_json:
            echo_json(records(plan))
        else:
            _say_plan_notes(plan)
            _echo_table(_headroom_shown(plan))
        if out and folder:
            folder.clear({"capacity.csv", "capacity.png"})
            plan.to_csv(out / "capacity.csv", index=False)
            fig = capacity_figure(plan, sc.subject(replayed_s=plan.attrs.get("reached_s")))
            fig.savefig(out / "capacity.png", dpi=110)
            close_figure(fig)
            folder.finish()
            click.echo(f"wrote {out / 'capacity.csv'} and {out / 'capacity.png'}")


def _say_plan_notes(plan: pd.DataFrame) -> None:
    """On stderr, beside a capacity plan's table: the SLOs and seed it was searched for (`planning.slo_line`),
    a note where its p99s rest on a few requests (`planning.few_requests_note`), and one where a kind's search read
    a p99 that rose with nodes near its SLO (`planning.noisy_search_note`)."""
    from simulator.planning import few_requests_note, slo_line

    click.echo(slo_line(plan), err=True)
    few = few_requests_note(plan.attrs.get("requests", 0), plan.attrs.get("offline", False))
    if few is not None:
        note(few)
    for line in plan.attrs.get("search_notes", []):
        note(line)


def _headroom_shown(plan: pd.DataFrame) -> pd.DataFrame:
    """The plan for a text table: a headroom the search never saw fail (``headroom_capped``) as a lower
    bound, ``≥ 7.5``, and no ``headroom_capped`` column (the CSV and JSON keep it)."""
    from simulator.planning import SEARCH_COLUMNS

    shown = plan.drop(columns=["headroom_capped", *SEARCH_COLUMNS], errors="ignore")  # (the SLOs: a line above)
    shown["headroom_scale"] = [("≥ " if capped else "") + ("–" if pd.isna(h) else figure(h))
                               for h, capped in zip(plan.headroom_scale, plan.headroom_capped, strict=True)]
    if shown.isna().any().any():  # a kind with no fleet: its figures read "–", the others as `_echo_table` has them
        for column in shown.columns:
            values = shown[column]
            if values.isna().any():
                shown[column] = ["–" if pd.isna(v) else figure(v) if isinstance(v, float) else str(v) for v in values]
    return shown


def _refuse_mode_options(max_rate: bool, offline: bool) -> None:
    """Refuse an option of --max-rate/--offline given on the command line without its mode (it
    would change nothing)."""
    ctx = click.get_current_context()
    needs = {"warmup_fraction": ("--warmup-fraction", max_rate or offline, "--max-rate or --offline"),
             "rel_tol": ("--rel-tol", max_rate, "--max-rate")}
    for name, (flag, applies, modes) in needs.items():
        if not applies and on_command_line(name):
            mode = "--offline, which does not bisect" if offline else "the fleet search (no --max-rate/--offline)"
            raise ConfigError(f"{flag} {shown(ctx.params[name])}: applies only with {modes}, not to {mode}; "
                              f"drop it or add {modes}")


# what a report writes only when the scenario's [report] asks for it (simulator.report.write_report)
_REPORT_PARTS = {"capacity": {"capacity.csv", "capacity.png"},
                 "collapse": {"collapse.csv", "collapse.png", "collapse_simulated.csv"},
                 "breakeven": {"breakeven.csv", "breakeven.png", "breakeven_provider.csv",
                               "breakeven_provider_inputs.csv"}}


def _report_names(sc: Scenario, fleets: Any) -> set[str]:
    """The names `kvsim run` writes in its folder for `sc`: the fixed files, the optional parts its
    [report] turns on, and one folder per fleet (`fleets`' keys)."""
    off = set().union(*(names for part, names in _REPORT_PARTS.items() if not getattr(sc.report, part)))
    return (set(OUTPUTS["run"]) - off) | {str(hw) for hw in fleets}


def _with_hardware(sc: Scenario, text: str) -> Scenario:
    """`sc` on the node kinds of ``--hardware`` `text` (comma-separated): at least one, each once."""
    from dataclasses import replace

    names = tuple(comma_items(text, "--hardware", "node kind", "H100,B200"))
    from simulator.study import node_kinds  # the API's rule: each kind once, by its node key

    return replace(sc, cluster=replace(sc.cluster, hardware=tuple(node_kinds(sc, names, "--hardware"))))


def _max_rate_mode(sc: Scenario, kinds: list[str], *, max_rate: bool, offline: bool, seeds: int, seed: int | None,
                   rel_tol: float, ttft: float | None, tpot: float | None, duration: float | None,
                   warmup_fraction: float, as_json: bool, folder: OutputFolder | None) -> None:
    """`capacity --max-rate` / `--offline`: the library's answers per node kind, as tables or JSON."""
    from simulator import maxrate
    from simulator.engine import SteadyWindow

    window = SteadyWindow(warmup_fraction=warmup_fraction)
    out = folder.path if folder else None
    names = {"max_rate.csv"} if max_rate else set()
    names |= {"offline.csv"} if offline else set()
    doc: dict[str, Any] = {"scenario": sc.name, "warmup_fraction": warmup_fraction}
    fleets = [(hw, label) for hw in kinds for label, _ in sc.fleets(hw)]  # with [disaggregation]: its xPyD fleets
    if max_rate:
        answers = []
        for hw, label in fleets:
            with progress_bar(f"max-rate search on {label}") as bar:
                answers.append(maxrate.max_rate(sc, hw, fleet=label, seeds=seeds, seed=seed, rel_tol=rel_tol,
                                                ttft_p99_s=ttft, tpot_p99_s=tpot, duration_s=duration, window=window,
                                                on_step=bar.note, progress=bar))
        doc["max_rate"] = [a.as_dict() for a in answers]
        if not as_json:
            for a in answers:
                click.echo("\n".join(a.describe()))
        if folder and out:
            folder.clear(names)  # the searches held: the earlier files go now
            pd.concat([a.to_frame() for a in answers]).to_csv(out / "max_rate.csv", index=False)
    if offline:
        frames = []
        for hw, label in fleets:
            with progress_bar(f"offline runs on {label}") as bar:
                frames.append(maxrate.offline_throughput(sc, hw, fleet=label, seeds=seeds, seed=seed,
                                                         duration_s=duration, window=window, on_step=bar.note,
                                                         progress=bar))
        frame = pd.concat(frames, ignore_index=True)
        doc["offline"] = records(frame)
        if not as_json:
            click.echo("offline (every request at t = 0; sustained over the steady window):")
            _echo_table(frame.drop(columns=["steady_state_warning"]))
            for row in frame[frame.steady_state_warning != ""].itertuples(index=False):  # as `kvsim run` warns
                warn(f"{row.hardware} seed {row.seed}: {row.steady_state_warning}")
        if folder and out:
            if not max_rate:
                folder.clear(names)
            frame.to_csv(out / "offline.csv", index=False)
    if as_json:
        echo_json(doc)
