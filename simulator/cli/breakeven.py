"""``kvsim breakeven``: does a 5-minute or a 1-hour prompt cache pay for this reuse?

A thin shell over `simulator.billing`: parse, compute the tables, print, optionally write
CSV and PNG charts to ``--out``. The lead wires `breakeven` into the ``kvsim`` group.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import numpy as np
import pandas as pd
from scipy import stats

from simulator.billing.profiles import PriceProfile, load_profiles, parse_ttl
from simulator.cli.common import (
    OutPath,
    OutputFolder,
    at_option,
    comma_items,
    config_errors,
    echo_json,
    on_command_line,
    records,
    stopped_cleanly,
    warn,
)
from simulator.cli.options import Renamed, duration_option, seed_option
from simulator.errors import ConfigError, RuleError, must, must_differ, shown

if TYPE_CHECKING:
    from simulator.billing.compare import TTLComparison


def _floats(text: str, what: str) -> list[float]:
    """`text`'s comma-separated numbers, each finite and > 0, each once (helper-159: ``--rate 1,`` dropped its
    empty item, ``--rate 1,1`` billed rate 1 twice)."""
    items = comma_items(text, f"--{what}", what, "0.5,2")
    try:
        values = [float(x) for x in items]
    except ValueError:
        raise ConfigError(f"--{what}: must be a number or a comma list of numbers (got {shown(text)})") from None
    must(all(math.isfinite(v) and v > 0 for v in values), "breakeven", what, "finite and > 0 each", text)
    must_differ(items, [f"{v!r}" for v in values], f"--{what}", "rate")
    return values


def parse_gaps(spec: str) -> Any:
    """``--gaps``: a file of gaps in seconds (one a line, or a CSV's first numeric column:
    `simulator.billing.gaps_file`) or a scipy distribution ``name:k=v,k=v`` in seconds, e.g.
    ``lognorm:s=1.2,scale=60``, ``expon:scale=120``."""
    path = Path(spec)
    if path.is_file():
        from simulator.billing.gaps_file import read_gaps

        return read_gaps(path)
    name, _, args = spec.partition(":")
    name = name.strip()
    dist = getattr(stats, name, None)
    if not isinstance(dist, stats.rv_continuous):
        if path.is_dir():
            raise ConfigError(f"--gaps: {spec!r} is a folder, not a file of gaps (nor a scipy.stats distribution)")
        if ":" not in spec and (path.suffix or "/" in spec):  # a path, by its look: a file that is not there
            raise ConfigError(f"--gaps: no such file {spec!r} (nor a scipy.stats distribution of that name)")
        raise ConfigError(
            f"--gaps: 'gaps' must be a file or a scipy.stats continuous distribution like "
            f"lognorm:s=1.2,scale=60 (got {spec!r})"
        )
    kwargs: dict[str, float] = {}
    # each parameter once, none empty, as every comma list (helper-164: lognorm:s=1.2,,scale=60 was taken)
    for part in comma_items(args, f"--gaps {name}", "parameter", "s=1.2,scale=60") if args.strip() else []:
        k, eq, v = part.partition("=")
        must(k.strip() not in kwargs, f"--gaps {name}", "parameter", "given once", part)
        try:
            kwargs[k.strip()] = float(v)
        except ValueError:
            raise ConfigError(f"--gaps: parameter {shown(part)} must be key=number") from None
        must(bool(eq) and math.isfinite(kwargs[k.strip()]), "--gaps", "parameter", "key=finite number", part)
    # scipy's own RuntimeWarnings (expon:scale=0 divides by zero) are not printed over the one-line error that
    # follows them (helper-195: two lines of scipy's source came first)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        frozen = _frozen(name, dist, kwargs)
        low, mean = frozen.support()[0], frozen.mean()
    must(low >= 0 and math.isfinite(mean), "--gaps", "gaps",
         "a distribution of gaps >= 0 seconds with a finite mean", spec)
    return frozen


def _frozen(name: str, dist: Any, kwargs: dict[str, float]) -> Any:
    """``dist(**kwargs)``, its parameters checked against the distribution's own: its shapes
    (``dist.shapes``), ``loc`` and ``scale``; every shape given, ``scale`` too (in seconds: scipy's default of 1
    is not taken in silence), and values in its domain."""
    shapes = [s.strip() for s in (dist.shapes or "").split(",") if s.strip()]
    allowed = [*shapes, "loc", "scale"]
    where, rule = f"--gaps {name}", f"one of {', '.join(allowed)}"
    for key in kwargs:
        must(key in allowed, where, "parameter", rule, key)
    missing = [s for s in shapes if s not in kwargs]
    if missing:
        raise ConfigError(f"{where}: needs the shape parameter(s) {', '.join(missing)} "
                          f"(parameters: {', '.join(allowed)}; got {shown(kwargs)})")
    if "scale" not in kwargs:  # (helper-195: --gaps expon drew gaps of mean 1 s, scipy's default scale, unsaid)
        raise ConfigError(f"{where}: needs scale=SECONDS, the gaps' scale (scipy's default, 1 s, is not assumed; "
                          f"parameters: {', '.join(allowed)}; got {shown(kwargs)})")
    try:
        frozen = dist(**kwargs)
        outside = any(math.isnan(x) for x in (*frozen.support(), frozen.cdf(1.0)))  # scipy's NaN for a bad value
    except (TypeError, ValueError):
        outside = True
    if outside:
        raise ConfigError(f"{where}: parameters outside the distribution's domain (got {shown(kwargs)}; "
                          f"parameters: {', '.join(allowed)}, with scale > 0)")
    return frozen


# the two savings bases, printed under their tables (numeric.gaps_rows, compare.compare_ttls)
BREAKEVEN_NOTE = ("reads_to_break_even: the fewest reads within a TTL of a write that make caching the prefix cost "
                  "less than sending it plain each time (1 where a write costs no more than plain input)")
PREFIX_SAVINGS_NOTE = ("savings_pct = 100 × (1 − relative_cost): the saving as a share of the prefix's input cost "
                       "without a cache (its tokens past the last whole cache increment billed plain either way), "
                       "not of a whole bill")
BILL_SAVINGS_NOTE = ("savings_usd = total_usd(none) − total_usd(TTL); savings_pct_of_input = 100 × savings_usd / "
                     "input_usd(none), the saving on the input bill without a cache; savings_pct_of_bill = 100 × "
                     "savings_usd / total_usd(none), the same saving as a share of the whole bill, output included")

# gaps.png's title under --gaps: one long-lived prefix, so the CDF at a TTL is its p_hit (numeric.gaps_rows)
GAPS_TITLE = ("Reuse gaps, {profile}: a sliding TTL catches the gaps left of its line\n(p_hit = share of gaps "
              "shorter than the TTL, the gaps table's; caching pays where p_hit is above p*)")

# numeric.breakeven_scale's definition, printed under the table
SCALE_NOTE = ("breakeven_scale c: every gap stretched c times puts caching at break-even, P(gap < TTL/c) = "
              "breakeven_p_hit (c > 1: it pays with that margin; c < 1: reuse must come 1/c times as often); "
              "breakeven_rate_per_min = 1/(c × mean gap), a mean rate, not a Poisson one")


def _scale_notes(prof: PriceProfile, ttls: list[float], gaps: Any, table: pd.DataFrame) -> list[str]:
    """Why a TTL's break-even scale is inf or NaN (`numeric.breakeven_scale`), one line each."""
    from simulator.billing.breakeven import breakeven_hit_probability
    from simulator.billing.numeric import SCALE_SEARCH_LOG, zero_gap_share

    notes = []
    for t, (label, c) in zip(ttls, table[["ttl", "breakeven_scale"]].itertuples(index=False), strict=True):
        p_star = breakeven_hit_probability(prof.read_multiplier, prof.write_multiplier(t))
        if math.isinf(c):
            # counted, with the share beside (helper-195: "1 of the gaps are 0 s" meant all of them)
            zeros = round(zero_gap_share(gaps) * gaps.size) if p_star > 0 else 0
            why = ("the TTL has no write premium" if p_star <= 0 else
                   f"{zeros:,} of the {gaps.size:,} gaps are 0 s, a share of {zero_gap_share(gaps):.4g}, at least "
                   f"breakeven_p_hit {p_star:.4g}")
            notes.append(f"breakeven_scale inf at {label}: caching pays however far the gaps stretch ({why})")
        elif math.isnan(c):
            notes.append(f"breakeven_scale NaN at {label}: P(gap < TTL/c) does not cross breakeven_p_hit "
                         f"{p_star:.4g} for any c in e^±{SCALE_SEARCH_LOG:g} (the gaps lie ~10^"
                         f"{int(SCALE_SEARCH_LOG / math.log(10))} times the TTL or more from it)")
    return notes


def _writes_note(prof: PriceProfile, ttls: list[float], bills: TTLComparison) -> str | None:
    """Why the Poisson tables and a workload's bills may name different TTLs (helper-131: code-repo-128k, whose
    reuse rate is far above the 5m/1h crossover, bills cheaper under 5m): the bills also pay for writes, at
    each TTL's price. None where the TTLs' write prices are one (no TTL's writes cost more), nothing was
    written, or the bills' best TTL is the longest (the note explains a shorter one) or no cache at all (no TTL
    paid, which is the break-even's matter, not the crossover's: helper-195, a lone request billed best
    uncached was told it "may bill cheaper under a shorter TTL than the crossover rate says")."""
    prices = {t: prof.write_multiplier(t) for t in ttls}
    if (len(set(prices.values())) < 2 or not bills.summary.write_tokens.sum() > 0
            or bills.best_ttl in (prof.ttl_name(max(ttls)), prof.ttl_name(0.0))):
        return None
    each = ", ".join(f"x{w:g} under {prof.ttl_name(t)}" for t, w in prices.items())
    return ("the Poisson tables price one prefix reused at one steady rate, written again only after a miss; the "
            f"simulated bills also pay, at each TTL's write price ({each}), for every new prefix's first write and "
            "each request's new tokens cached for the next, so a workload that writes much of what it reads may "
            "bill cheaper under a shorter TTL than the crossover rate says")


def _ttls(profile: PriceProfile, text: str | None) -> list[float]:
    """``--ttl``'s seconds (the profile's when None); a TTL the profile does not sell is said as written."""
    items = text.split(",") if text is not None else []  # '' is an empty item, not the default (helper-147)
    seconds = []
    for item in items:
        try:
            seconds.append(parse_ttl(item))
        except RuleError as exc:
            raise ConfigError(exc.at("--ttl", got=item)) from None
        # no cache is every table's baseline: a 0 among TTLs would be dropped without a word (helper-147)
        must(seconds[-1] > 0 or len(items) == 1, "--ttl", "ttl", "TTLs > 0 (no cache, 'none', is every table's "
             "baseline already)", item)
    must_differ(items, [f"{t:g} s" for t in seconds], "--ttl", "TTL")  # (one row a TTL: a second would be dropped)
    ttls: dict[float, str] = (dict(zip(seconds, items, strict=True)) if text is not None
                              else {t: "" for t in profile.ttl_s})
    chosen = sorted(t for t in ttls if t > 0)
    must(bool(chosen), "--ttl", "ttl", "at least one TTL > 0", text)
    for t in chosen:
        try:
            profile.write_multiplier(t)  # raises listing the TTLs the profile sells
        except RuleError as exc:
            raise ConfigError(exc.at("--ttl", got=ttls[t] or None)) from None
    return chosen


def _uncacheable_note(prof: PriceProfile, prefix_tokens: int) -> str:
    """Why a prefix below the profile's minimum cacheable length gains nothing from any TTL, and
    its plain input price, ``prefix_tokens × input $/MTok / MTOK``."""
    return (f"note: a {prefix_tokens:,}-token prefix is below {prof.key}'s minimum cacheable prefix of "
            f"{prof.min_cacheable_tokens:,} tokens: it cannot be cached under this profile, so every request pays "
            f"the plain input price, ${prof.input_usd(prefix_tokens):.4g} a request, under any TTL (the break-even "
            f"rates below hold for prefixes of {prof.min_cacheable_tokens:,} tokens or more)")


def _closed_form_note(prof: PriceProfile) -> str | None:
    """The break-even, crossover and --rate tables (Poisson reuse) count a TTL fixed at creation and a storage
    fee (`simulator.billing.breakeven.poisson_cost`); the --gaps table models a sliding TTL with no storage fee
    (`simulator.billing.numeric`): say so for a profile whose TTL is fixed or that bills storage, whose
    bill under any reuse pattern the --workload replay (`simulator.billing.ledger`) gives."""
    storage = prof.storage_usd_per_mtok_hour
    parts = ([] if prof.sliding else ["its TTL runs from the write, not refreshed by reads"]) + (
        [f"it bills storage at ${storage:g}/MTok-hour (storage_per_ttl: that of one TTL, in units of the "
         "prefix's input price)"] if storage else [])
    if not parts:
        return None
    return (f"note: under {prof.key} {' and '.join(parts)}. The break-even, crossover and --rate tables (Poisson "
            "reuse) count this; the --gaps table assumes a sliding TTL and no storage fee, so it overstates its "
            "hits and savings there; --workload bills any reuse as the profile does")


def _uncached_note(reason: str | None, automatic: list[str]) -> str | None:
    """The replay's reason that nothing was cached, with the profiles that cache without breakpoints (`automatic`:
    given where no request marks one)."""
    if reason is None:
        return None
    if not automatic:
        return reason
    names = " or ".join(f"--profile {name}" for name in automatic)
    return f"{reason}; {names} caches prefixes automatically"


def _refuse_replay_options() -> None:
    """Without --workload: refuse an option of the replay given on the command line (it would change nothing)."""
    ctx = click.get_current_context()
    for name, flag in (("seed", "--seed"), ("duration_s", "--duration-s"), ("write_latency_s", "--write-latency-s"),
                       ("skip_bad_rows", "--skip-bad-rows")):
        if on_command_line(name):
            value = ctx.params[name]
            shown_value = "" if isinstance(value, bool) else f" {value:g}"
            raise ConfigError(f"breakeven: {flag}{shown_value} applies only with --workload (it shapes "
                              "the replay; the --rate, --gaps and break-even tables take none): drop it or add "
                              "--workload")


def _show(title: str, frame: pd.DataFrame) -> None:
    click.echo(f"\n{title}")
    click.echo(frame.to_string(index=False, float_format=lambda v: f"{v:.4g}"))


@click.command("breakeven")
@click.option("--profile", default=None, help="Price profile (anthropic, openai, deepseek, gemini).")
@click.option("--tier", default=None, help="Model tier of the profile (default: the profile's default).")
@click.option("--catalog", "--profiles", "profiles_file", cls=Renamed, default=None,
              help="Extra TOML file of price profiles ([profile.NAME] tables, as simulator/billing/profiles.toml).")
@click.option("--ttl", "ttl_text", default=None, help="Comma list of TTLs, e.g. 5m,1h (default: all sold).")
@click.option("--prefix-tokens", type=int, default=None,
              help="Cached prefix length, for costs in USD. One shorter than the profile's minimum cacheable "
              "length cannot be cached: it is billed as plain input under every TTL (a note says so).")
@click.option(
    "--rate", "rate_text", default=None, help="Prefix reuses per minute (Poisson); comma list allowed."
)
@click.option(
    "--gaps",
    "gaps_spec",
    default=None,
    help="Reuse gaps in seconds: a scipy.stats distribution, e.g. lognorm:s=1.2,scale=60, or a file of one "
    "gap a line (or a CSV: its first numeric column).",
)
@click.option(
    "--workload", "workload_spec", default=None,
    help="Workload: generator name (chat-4k, code-repo-128k, synthetic), a TOML file with [workload], or a trace file.",
)
@seed_option("--workload only: seed of the generated workload (default: a scenario file's own seed, as kvsim "
             "run's; else 0).")
@duration_option("--workload only: seconds of it to generate or replay (default: the workload's).")
@click.option(
    "--write-latency-s", type=float, default=0.0, show_default=True,
    help="--workload only: the replay's write-to-readable delay."
)
@click.option("--skip-bad-rows", is_flag=True, help="--workload only: skip malformed trace rows (counted); "
              "default: stop")
@click.option(
    "--out", type=OutPath(file_okay=False), default=None, help="Write CSV + PNG here."
)
@click.option("--json", "as_json", is_flag=True, help="print the tables as JSON instead")
def breakeven(
    profile: str | None,
    tier: str | None,
    profiles_file: str | None,
    ttl_text: str | None,
    prefix_tokens: int | None,
    rate_text: str | None,
    gaps_spec: str | None,
    workload_spec: str | None,
    seed: int | None,
    duration_s: float | None,
    write_latency_s: float,
    skip_bad_rows: bool,
    out: Path | None,
    as_json: bool,
) -> None:
    """Break-even reuse rates of prompt-cache TTLs, and the cost of your reuse pattern under each.

    --seed, --duration-s, --write-latency-s and --skip-bad-rows shape the --workload replay: without --workload
    they are refused.
    This prices the customer's bill; the provider's side (the KV a TTL holds in memory against the prefill it
    saves) is in `kvsim run`'s report ([report] breakeven, on by default: `kvsim run ttl-breakeven`).
    """
    from simulator.billing.numeric import cost_curves, crossovers, gaps_rows, ttl_rows

    def show(title: str, frame: pd.DataFrame) -> None:
        if not as_json:
            _show(title, frame)

    def echo(text: str) -> None:
        click.echo(text, err=as_json)  # with --json, notes go to stderr and stdout holds the document

    folder = OutputFolder(out, "breakeven") if out is not None else None
    with config_errors(), stopped_cleanly("breakeven", folder):  # Ctrl-C: exit 130, one line, no partial output
        must(math.isfinite(write_latency_s) and write_latency_s >= 0, "breakeven", "--write-latency-s",
             "finite seconds >= 0", write_latency_s)
        if workload_spec is None:
            _refuse_replay_options()
        if folder:
            folder.prepare()  # a bad --out fails now, not after the tables; nothing is removed yet
        with at_option("--catalog", profiles_file):  # a missing file; its content's errors name it
            profiles = load_profiles(extra=profiles_file)
        with at_option("--tier" if tier is not None and profiles.profile_key(profile) else "--profile"):
            prof = profiles.get(profile, tier)
        ttls = _ttls(prof, ttl_text)
        given = [x for x in (rate_text, gaps_spec, workload_spec) if x is not None]
        must(len(given) <= 1, "breakeven", "--rate/--gaps/--workload", "at most one of them", len(given))
        if prefix_tokens is not None:
            must(prefix_tokens >= 1, "breakeven", "prefix_tokens", ">= 1 token", prefix_tokens)
        rates = _floats(rate_text, "rate") if rate_text else []
        from simulator.limits import MAX_REUSE_PER_MIN  # (helper-195: 1e308 overflowed the chart's axis to NaN)

        must(all(r <= MAX_REUSE_PER_MIN for r in rates), "breakeven", "rate",
             f"at most {MAX_REUSE_PER_MIN:,.0f} reuses a minute each (a limit: README, Limits)", rate_text)
        gaps = parse_gaps(gaps_spec) if gaps_spec is not None else None  # a bad --gaps fails before any table
        wl = None
        if workload_spec is not None:  # read before any table: a workload with no request fails now
            from workloads import load_workload

            wl = load_workload(workload_spec, seed=seed, duration_s=duration_s, name="--workload",
                               on_error="skip" if skip_bad_rows else "stop")
        comparison, unknown = None, ""
        if wl is not None:  # billed before any table: a malformed trace row fails here, not after the tables
            from simulator.billing.compare import compare_ttls
            from workloads.workload import say_left_out

            comparison = compare_ttls(wl, prof, ["none", *ttls], write_latency_s=write_latency_s)
            say_left_out(wl, warn, "--duration-s")  # rows skipped, a window cut: what the bills leave out
            summary = wl.summary()
            unknown = summary.prefix_note if summary.n_reuses is None else ""  # a trace that carries no prefix ids
        table = ttl_rows(prof, ttls)
        cross = crossovers(prof, ttls)
        echo(
            f"profile {prof.key}: input ${prof.input_usd_per_mtok:g}/MTok, read x{prof.read_multiplier:g} "
            f"({prof.source}, {prof.as_of})"
        )
        # a prefix below the minimum is plain input at every rate (its note; the chart marks no break-even)
        uncacheable = False
        if prefix_tokens is not None and (uncacheable := prof.cacheable_tokens(prefix_tokens) == 0):
            echo(_uncacheable_note(prof, prefix_tokens))
        closed_form_note = _closed_form_note(prof)
        if closed_form_note:
            echo(closed_form_note)
        show("Break-even for Poisson reuse (rates in reuses per minute):", table)
        if not as_json:
            echo(BREAKEVEN_NOTE)
        if not cross.empty:
            show("Longer TTL cheaper above:", cross)
        frames: dict[str, pd.DataFrame] = {"breakeven": table, "crossovers": cross}
        if rates:
            costs = cost_curves(prof, ttls, rates, prefix_tokens)
            show("Expected prefix cost per request at your rate(s) (1 = no cache):", costs)
            echo(PREFIX_SAVINGS_NOTE)
            frames["costs"] = costs
        if gaps is not None:
            g = gaps_rows(prof, ttls, gaps, prefix_tokens)
            read = ("" if hasattr(gaps, "cdf") else
                    f" ({gaps.size:,} gap{'s' * (gaps.size != 1)} read, mean {gaps.mean():.4g} s)")
            show(f"Reuse gaps {gaps_spec}{read}:", g)
            for note in [PREFIX_SAVINGS_NOTE, SCALE_NOTE, *_scale_notes(prof, ttls, gaps, g)]:
                echo(note)
            frames["gaps"] = g
        if comparison is not None:
            show("Simulated bills per TTL:", comparison.summary)
            echo(BILL_SAVINGS_NOTE)
            show("Reuse-gap percentiles (s):", comparison.gap_percentiles_s.to_frame().T)
            if not unknown and comparison.gap_percentiles_s.isna().all():  # (helper-195: a row of NaN, unsaid)
                echo("no reuse gaps: no prefix was sent twice, so the percentiles are NaN")
            uncached = _uncached_note(comparison.uncached_reason,
                                      profiles.automatic() if comparison.breakpoints_missing else [])
            if unknown:
                echo(f"\nnote: {unknown}: the bills above price every prompt as new, which this trace cannot tell")
            elif uncached:
                echo(f"\nnote: {uncached}")
            echo("\nbest TTL for the customer: " + ("unknown (the trace's reuse is unknown: see the note above)"
                                                    if unknown else comparison.best_ttl
                                                    + (" (nothing was cached: see the note above)" if uncached
                                                       else "")))
            writes = None if cross.empty or unknown or uncached else _writes_note(prof, ttls, comparison)
            if writes:
                echo(f"note: {writes}")
            frames["workload"] = comparison.summary
        if out is not None and folder:
            from simulator.billing import charts  # matplotlib: only where the charts are drawn

            folder.clear()  # the tables are done: breakeven's earlier files go now
            for name, frame in frames.items():
                frame.to_csv(out / f"{name}.csv", index=False)
            lo = min([1e-3, *[r / 10 for r in rates]])
            hi = max([10.0, *[r * 10 for r in rates]])
            grid = np.logspace(math.log10(lo), math.log10(hi), 300)
            y = "usd_per_request" if prefix_tokens else "relative_cost"
            suffix = f", {prefix_tokens:,}-token prefix" if prefix_tokens else ""
            # below the minimum no TTL pays, so no break-even or crossover is marked on its flat lines (helper-178:
            # "5m pays above 0.049/min" was drawn where nothing is cached)
            if uncacheable:
                suffix += (f"\n(below the {prof.min_cacheable_tokens:,}-token minimum: not cacheable, plain input "
                           "under every TTL)")
            ax = charts.plot_cost_vs_rate(
                cost_curves(prof, ttls, grid, prefix_tokens), None if uncacheable else table,
                None if uncacheable else cross, y=y, title=f"Prompt-cache break-even, {prof.key}{suffix}",
            )  # fmt: skip
            for r in rates:
                ax.axvline(r, color="k", lw=1.0, alpha=0.5)
                ax.annotate("your rate", (r, 0.02), xycoords=("data", "axes fraction"), rotation=90, fontsize=8,
                            xytext=(3, 0), textcoords="offset points")  # fmt: skip
            charts.save_png(ax, out / "breakeven.png")
            written = ["breakeven.png"]
            skipped = ""
            if comparison is not None:
                reason = comparison.uncached_reason
                title = charts.nothing_cached_title(reason) if reason else None
                charts.save_png(charts.plot_savings_vs_ttl(comparison.summary, title=title), out / "savings.png")
                gaps = comparison.results["none"].frame["reuse_gap_s"].dropna().to_numpy()
                written.append("savings.png")
                if reason:  # no candidate prefix, so no gap was observed: an empty chart would read as data
                    gaps, skipped = None, f" (no gaps.png: {reason.split(':')[0]}, so there are no reuse gaps)"
            if gaps is not None and "gaps" in frames:  # --gaps, a distribution or a file: its p_hit marked
                label = (f"reuse gaps: {gaps_spec}" if hasattr(gaps, "cdf")
                         else f"reuse gaps: {Path(str(gaps_spec)).name} ({gaps.size:,} gaps)")
                charts.save_png(charts.plot_gap_cdf(gaps, table, hits=frames["gaps"], label=label,
                                                    title=GAPS_TITLE.format(profile=prof.key)), out / "gaps.png")
                written.append("gaps.png")
            elif gaps is not None:  # --workload's observed gaps
                charts.save_png(charts.plot_gap_cdf(gaps, table), out / "gaps.png")
                written.append("gaps.png")
            folder.finish()
            echo(f"\nwrote {', '.join([f'{n}.csv' for n in frames] + written)} to {out}{skipped}")
        if as_json:
            echo_json({"profile": prof.key,
                       "best_ttl": comparison.best_ttl if comparison is not None and not unknown else None,
                       "reuse_unknown": bool(unknown),
                       "nothing_cached": comparison.uncached_reason if comparison is not None else None,
                       **{name: records(frame) for name, frame in frames.items()}})
