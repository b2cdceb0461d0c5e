"""GPU and node specs, loaded from the TOML catalogs beside this module.

A user file with the same schema (``[gpu.NAME]`` / ``[node.NAME]`` tables) adds entries or
overrides shipped ones: ``load_catalog(extra=Path("my_gpus.toml"))``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

from simulator.config import construct
from simulator.errors import ConfigError, must, must_differ, must_whole, shown
from simulator.tomlfile import read_toml

T = TypeVar("T")

_HERE = Path(__file__).parent
GPU_FILE = _HERE / "gpus.toml"
NODE_FILE = _HERE / "nodes.toml"

COMPUTE_DTYPES = ("bf16", "fp8", "fp4")
DEFAULT_NODE = "8xH100"  # the node a command uses when none is named
PRICE_RULE = "a finite number > 0 (USD per GPU-hour) for every GPU, or one per GPU"


@dataclass(frozen=True, slots=True, kw_only=True)
class GPUSpec:
    """One accelerator. Bandwidths of links are per direction; FLOP/s are dense peaks; `sm_count`
    is the streaming multiprocessors (AMD: compute units) that kernels' thread blocks fill in waves;
    `nvswitch_reduce` says whether the GPUs' switch reduces in the network (NVLink SHARP, which
    NCCL's NVLS all-reduce uses); `l2_bytes` is the on-chip L2 cache the SMs share (0: not given), which
    a kernel's working set fits in or not (`simulator.cost.aiconfigurator.MIN_FIT_KERNEL_S`), and the
    GPU-side scripts' inputs must outgrow where PyTorch does not give its size (`measure_attention.l2_bytes`)."""

    key: str
    name: str
    hbm_bytes: float
    hbm_bytes_per_s: float
    sm_count: int
    bf16_flops: float
    fp8_flops: float
    fp4_flops: float
    nvlink_bytes_per_s: float
    nvswitch_reduce: bool
    pcie_bytes_per_s: float
    usd_per_gpu_hour: float
    source: str
    l2_bytes: float = 0.0  # a datasheet figure where NVIDIA or AMD give one; 0 where the catalog does not know it
    # the catalog's price when a user's replaced it (`Catalog.priced`); None: `usd_per_gpu_hour` is the catalog's
    catalog_usd_per_gpu_hour: float | None = None

    def __post_init__(self) -> None:
        where = f"GPUSpec({self.key})"
        # inf is refused as NaN is (helper-159: hbm_bytes = inf reached capacity as a NaN traceback, a price of
        # inf printed "$/h inf"); a price of 0 is refused as cluster.usd_per_gpu_hour and --usd-per-gpu-hour
        # refuse it (it priced every run at $0). fp8_flops and fp4_flops may be 0: no tensor cores of that dtype
        for f in ("hbm_bytes", "hbm_bytes_per_s", "bf16_flops", "nvlink_bytes_per_s", "pcie_bytes_per_s",
                  "usd_per_gpu_hour"):
            v = getattr(self, f)
            must(math.isfinite(v) and v > 0, where, f, "a finite number > 0", v)
        must(type(self.nvswitch_reduce) is bool, where, "nvswitch_reduce", "true or false", self.nvswitch_reduce)
        must_whole(self, where, "sm_count", 1, "an integer >= 1")
        for f in ("fp8_flops", "fp4_flops"):
            v = getattr(self, f)
            must(math.isfinite(v) and v >= 0, where, f, "a finite number >= 0 (0: no tensor cores of that dtype)", v)
        must(math.isfinite(self.l2_bytes) and self.l2_bytes >= 0, where, "l2_bytes",
             "a finite number >= 0 (0: not given)", self.l2_bytes)
        must(bool(self.source.strip()), where, "source", "a non-empty citation", self.source)

    def has_tensor_cores(self, dtype: str) -> bool:
        """Whether the GPU computes in `dtype` (``bf16``/``fp16``, ``fp8``, ``fp4``): its peak is above 0."""
        key = "bf16" if dtype in ("bf16", "fp16") else dtype
        return key in COMPUTE_DTYPES and getattr(self, f"{key}_flops") > 0

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s for a compute dtype (``bf16``/``fp16``, ``fp8``, ``fp4``).

        Raises `ConfigError` when the GPU has no tensor cores for that dtype.
        """
        key = "bf16" if dtype in ("bf16", "fp16") else dtype
        must(key in COMPUTE_DTYPES, f"GPUSpec({self.key})", "dtype", f"one of {', '.join(COMPUTE_DTYPES)}", dtype)
        flops: float = getattr(self, f"{key}_flops")
        if not self.has_tensor_cores(dtype):
            can = [d for d in COMPUTE_DTYPES if self.has_tensor_cores(d)]
            raise ConfigError(f"{self.key} has no {dtype} tensor cores ({key}_flops = 0 in the GPU catalog): "
                              f"it computes in {', '.join(can)} (got {dtype!r}); weights in {dtype} run their "
                              "GEMMs weight-only there (simulator.models.gemm_dtype)")
        return flops

    def price_note(self) -> str:
        """The price in use, and where it came from: ``H100 2.50 USD/GPU-hour (overridden; catalog 2.99)``."""
        was = self.catalog_usd_per_gpu_hour
        how = "catalog" if was is None else f"overridden; catalog {was:,.2f}"
        return f"{self.key} {self.usd_per_gpu_hour:,.2f} USD/GPU-hour ({how})"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSpec:
    """A server of `gpus` identical GPUs with host DRAM, local NVMe and its interconnect.

    ``nic_bytes_per_s`` is one GPU's scale-out NIC (per direction), ``nic_latency_s`` a message's
    latency over it, ``nvlink_domain_gpus`` the GPUs one NVLink domain joins (the node itself in
    an HGX server, 72 in an NVL72 rack). A user catalog may leave the interconnect out (0: unknown;
    the domain is then the node): a plan that spans nodes then says what is missing. A NIC given needs its
    latency too.
    """

    key: str
    gpu: GPUSpec
    gpus: int
    host_dram_bytes: float
    nvme_bytes: float
    nvme_bytes_per_s: float
    source: str
    nic_bytes_per_s: float = 0.0
    nic_latency_s: float = 0.0
    nvlink_domain_gpus: int = 0

    def __post_init__(self) -> None:
        where = f"NodeSpec({self.key})"
        must(self.gpus >= 1, where, "gpus", ">= 1", self.gpus)
        # 0 is none (no host DRAM or NVMe for an offload tier: `check_tiers` refuses the tier) or unknown (the NIC);
        # inf is refused (helper-159: it was taken silently)
        for f in ("host_dram_bytes", "nvme_bytes", "nvme_bytes_per_s", "nic_bytes_per_s", "nic_latency_s"):
            v = getattr(self, f)
            must(math.isfinite(v) and v >= 0, where, f, "a finite number >= 0", v)
        # NVMe with no read bandwidth would reload an nvme tier's blocks in bytes / 0 (helper-159: a ZeroDivisionError
        # traceback from the prefix cache): a catalog that gives the drives gives their bandwidth too
        must(not (self.nvme_bytes > 0 and self.nvme_bytes_per_s == 0), where, "nvme_bytes_per_s",
             "> 0 where nvme_bytes is (the drives' read bandwidth)", self.nvme_bytes_per_s)
        # a NIC with no latency would move KV in bytes / bandwidth alone: a catalog that gives one gives both
        must(not (self.nic_bytes_per_s > 0 and self.nic_latency_s == 0), where, "nic_latency_s",
             "> 0 where nic_bytes_per_s is (a message's latency over the NIC)", self.nic_latency_s)
        d = self.nvlink_domain_gpus
        must(type(d) is int and (d == 0 or (d >= self.gpus and d % self.gpus == 0)), where, "nvlink_domain_gpus",
             f"0 (the node) or a multiple of the node's {self.gpus} GPUs", d)

    @property
    def domain_gpus(self) -> int:
        """GPUs of one NVLink domain (the node's own when the catalog does not say)."""
        return self.nvlink_domain_gpus or self.gpus

    @property
    def hbm_bytes(self) -> float:
        """Total HBM of the node: ``gpus × gpu.hbm_bytes``."""
        return self.gpus * self.gpu.hbm_bytes

    @property
    def usd_per_hour(self) -> float:
        """Node price: ``gpus × gpu.usd_per_gpu_hour``."""
        return self.gpus * self.gpu.usd_per_gpu_hour


@dataclass(frozen=True, slots=True)
class Catalog:
    gpus: dict[str, GPUSpec]
    nodes: dict[str, NodeSpec]

    def gpu(self, name: str) -> GPUSpec:
        """Look a GPU up by key, case-insensitively; unknown names list the valid ones."""
        return _lookup(self.gpus, name, "GPU")

    def node(self, name: str) -> NodeSpec:
        """A node by key (``8xH100``), or by GPU key alone: the largest node of that GPU, the first
        listed on a tie (``H100`` means ``8xH100``, not its ``1xH100`` or ``4xH100`` slices)."""
        by_gpu: dict[str, NodeSpec] = {}
        for n in self.nodes.values():
            best = by_gpu.get(n.gpu.key.lower())
            if best is None or n.gpus > best.gpus:
                by_gpu[n.gpu.key.lower()] = n
        if name.lower() in by_gpu and name.lower() not in {k.lower() for k in self.nodes}:
            return by_gpu[name.lower()]
        return _lookup(self.nodes, name, "node")

    def priced(self, prices: float | Mapping[str, float] | None, where: str) -> Catalog:
        """This catalog with `prices` in USD per GPU-hour instead of the catalogued ones: one number for
        every GPU, or a table of GPU key -> number (the others keep theirs); None: unchanged. Each
        replaced GPU keeps the catalog's figure in ``catalog_usd_per_gpu_hour``; nodes follow their GPU.

        Raises `ConfigError` naming `where` (the option or scenario key) for a value that is not a
        finite number > 0 or a GPU the catalog does not hold.
        """
        if prices is None:
            return self
        def price(usd: object, what: str) -> float:
            if not (isinstance(usd, int | float) and not isinstance(usd, bool) and math.isfinite(usd) and usd > 0):
                raise ConfigError(f"{what}: must be {PRICE_RULE} (got {shown(usd)})")
            return float(usd)

        if isinstance(prices, Mapping):
            if not prices:
                raise ConfigError(f"{where}: must be {PRICE_RULE} (got an empty table)")
            known = {k.lower(): k for k in self.gpus}
            unknown = [str(k) for k in prices if str(k).lower() not in known]
            if unknown:
                raise ConfigError(f"{where}: unknown GPU {shown(unknown[0])}; valid: {', '.join(self.gpus)}")
            must_differ([str(k) for k in prices], [known[str(k).lower()] for k in prices], where, "GPU")
            table = {known[str(k).lower()]: price(v, f"{where}.{k}") for k, v in prices.items()}
        else:
            usd = price(prices, where)
            table = dict.fromkeys(self.gpus, usd)
        gpus = {k: g if k not in table else replace(g, usd_per_gpu_hour=table[k],
                                                    catalog_usd_per_gpu_hour=g.catalog_usd_per_gpu_hour
                                                    if g.catalog_usd_per_gpu_hour is not None else g.usd_per_gpu_hour)
                for k, g in self.gpus.items()}
        nodes = {k: n if n.gpu.key not in table else replace(n, gpu=gpus[n.gpu.key]) for k, n in self.nodes.items()}
        return Catalog(gpus, nodes)


def price_note(nodes: Iterable[NodeSpec]) -> str:
    """``GPU prices: H100 2.50 USD/GPU-hour (overridden; catalog 2.99), H200 3.79 USD/GPU-hour (catalog)``:
    the price in use of each GPU of `nodes`, once, and where it came from."""
    return "GPU prices: " + ", ".join(dict.fromkeys(n.gpu.price_note() for n in nodes))


def parse_prices(text: str, where: str) -> float | dict[str, float]:
    """``--usd-per-gpu-hour``: ``"2.5"`` (every GPU) or ``"H100=2.1,H200=3.4"`` -> a number or a table;
    each price a finite number > 0, each GPU once under any spelling (``H100`` and ``h100`` are one
    GPU, as `Catalog.priced` looks them up: otherwise the last price would win without a word).
    GPU names are checked by `Catalog.priced`."""
    def number(item: str) -> float:
        try:
            usd = float(item)
        except ValueError:
            usd = math.nan
        if not (math.isfinite(usd) and usd > 0):
            raise ConfigError(f"{where}: must be {PRICE_RULE} like H100=2.1,H200=3.4 (got {shown(text)})")
        return usd

    if "=" not in text:
        return number(text.strip())
    table: dict[str, float] = {}
    for pair in text.split(","):
        name, eq, value = pair.partition("=")
        if not eq or not name.strip() or name.strip().lower() in {k.lower() for k in table}:
            raise ConfigError(f"{where}: must be {PRICE_RULE} like H100=2.1,H200=3.4, each GPU once "
                              f"(got {shown(text)})")
        table[name.strip()] = number(value.strip())
    return table


def _lookup(table: dict[str, T], name: str, what: str) -> T:
    for k, v in table.items():
        if k.lower() == name.lower():
            return v
    raise ConfigError(f"unknown {what} {name!r}; valid: {', '.join(table)}")


def _build(cls: type, where: str, key: str, raw: dict[str, Any], **extra: Any) -> Any:
    fields = {f.name for f in dataclasses.fields(cls)} - {"key", "catalog_usd_per_gpu_hour"} - set(extra)
    unknown = set(raw) - fields
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}; valid: {', '.join(sorted(fields))}")
    return construct(cls, raw, where, key=key, **extra)


def parse_catalog(data: dict[str, Any], path: Path, base: Catalog | None = None) -> Catalog:
    """Turn parsed TOML into specs; entries extend (or override) `base`. A GPU or node this file defines again
    (its key in any case: ``[gpu.h100]`` is ``H100``, ``[node.8xh100]`` is ``8xH100``) replaces `base`'s under
    `base`'s key (a name given twice in one file, in two cases, is refused), and `base`'s nodes of a GPU it
    replaces follow it (their price, memory and speeds are the new GPU's): they had kept the old one while
    ``kvsim hardware`` listed the new."""
    gpus = dict(base.gpus) if base else {}
    nodes = dict(base.nodes) if base else {}
    unknown = set(data) - {"gpu", "node"}
    if unknown:
        raise ConfigError(f"{path}: unknown table {sorted(unknown)[0]!r}; valid: gpu, node")
    for table in ("gpu", "node"):  # [gpu.NAME] and [node.NAME] tables, each a table of keys
        if not isinstance(data.get(table, {}), dict):
            raise ConfigError(f"{path}: {table}: must be tables [{table}.NAME] (got {shown(data[table])})")
        seen: dict[str, str] = {}
        for key, raw in data.get(table, {}).items():
            if not isinstance(raw, dict):
                raise ConfigError(f"{path}: {table}.{key}: must be a table of keys (got {shown(raw)})")
            if key.lower() in seen:  # names match in any case: one of the two would be silently unreachable
                raise ConfigError(f"{path}: {table}.{key}: given twice, as {table}.{seen[key.lower()]} too (names "
                                  "match in any case); keep one")
            seen[key.lower()] = key
    redefined = set()
    for name, raw in data.get("gpu", {}).items():
        key = next((k for k in gpus if k.lower() == name.lower()), name)  # an existing GPU keeps its key
        gpus[key] = _build(GPUSpec, f"{path}: gpu.{name}", key, raw)
        redefined.add(key)
    nodes = {k: replace(n, gpu=gpus[n.gpu.key]) if n.gpu.key in redefined else n for k, n in nodes.items()}
    for name, raw in data.get("node", {}).items():
        raw = dict(raw)
        gpu_key = raw.pop("gpu", None)
        if gpu_key is None:
            raise ConfigError(f"{path}: node.{name}: missing key 'gpu'")
        gpu = _lookup(gpus, str(gpu_key), f"GPU in {path}: node.{name}.gpu:")
        key = next((k for k in nodes if k.lower() == name.lower()), name)  # an existing node keeps its key
        nodes[key] = _build(NodeSpec, f"{path}: node.{name}", key, raw, gpu=gpu)
    return Catalog(gpus, nodes)


@cache
def _shipped() -> Catalog:
    cat = parse_catalog(read_toml(GPU_FILE), GPU_FILE)
    return parse_catalog(read_toml(NODE_FILE), NODE_FILE, cat)


def load_catalog(extra: str | Path | None = None) -> Catalog:
    """The GPUs and nodes every command sizes against: ``hardware/gpus.toml`` and ``nodes.toml`` (each
    figure with its source), extended by the TOML file `extra` when given.

    A GPU holds HBM bytes and bandwidth, dense FLOP/s per dtype, NVLink and PCIe bandwidth and a price per
    GPU-hour; a node, a GPU kind × count with its host DRAM, NVMe and scale-out network. `extra`'s
    ``[gpu.NAME]`` and ``[node.NAME]`` tables add entries or replace the shipped ones of that name (any
    case), and a replaced GPU's nodes follow it (`parse_catalog`). Look entries up with ``.gpu(name)`` and
    ``.node(name)`` (``"H100"`` is the largest H100 node, ``8xH100``)."""
    must(extra is None or isinstance(extra, str | PathLike), "load_catalog", "extra",
         "a catalog TOML file's path (a str or Path), or None: the shipped catalog alone", extra)
    cat = _shipped()
    if extra is not None:
        cat = parse_catalog(read_toml(Path(extra)), Path(extra), cat)
    return cat
