"""Prompt-cache billing: price profiles, replay bills, break-even and provider economics.

Customer side: `load_profiles`/`get_profile` (price data in ``profiles.toml``), `bill_requests`
and `Ledger` (replay a workload in arrival order), `compare_ttls` (savings per TTL). Closed
forms for Poisson reuse in `breakeven`, numeric versions for any gap distribution in
`numeric`. Provider side (`provider`): KV byte-seconds held against prefill saved. Charts in
`simulator.billing.charts` (imported on demand: it pulls in matplotlib).
"""

from simulator.billing.breakeven import (
    breakeven_hit_probability,
    breakeven_reuse_rate,
    crossover_reuse_rate,
    expire_cost_rate,
    hit_probability_poisson,
    keepalive_breakeven_rate,
    keepalive_cost_rate,
    reads_to_break_even,
    relative_cost,
)
from simulator.billing.compare import TTLComparison, compare_profiles, compare_ttls
from simulator.billing.ledger import BillResult, Ledger, RequestBill, Residency, bill_many, bill_requests
from simulator.billing.numeric import (
    breakeven_rate,
    breakeven_scale,
    cost_curves,
    crossovers,
    gaps_rows,
    hit_probability,
    keepalive_ping_rate,
    ttl_rows,
)
from simulator.billing.profiles import (
    PriceProfile,
    ProfileCatalog,
    get_profile,
    load_profiles,
    parse_ttl,
    ttl_label,
)
from simulator.billing.provider import (
    ProviderCosts,
    best_ttls,
    capacity_holding_usd,
    hbm_holding_usd,
    kv_byte_seconds,
    load_provider_costs,
    prefill_saved_usd,
    provider_table,
)

__all__ = [
    "BillResult",
    "Ledger",
    "PriceProfile",
    "ProfileCatalog",
    "ProviderCosts",
    "RequestBill",
    "Residency",
    "TTLComparison",
    "best_ttls",
    "bill_many",
    "bill_requests",
    "breakeven_hit_probability",
    "breakeven_rate",
    "breakeven_reuse_rate",
    "breakeven_scale",
    "capacity_holding_usd",
    "compare_profiles",
    "compare_ttls",
    "cost_curves",
    "crossover_reuse_rate",
    "crossovers",
    "expire_cost_rate",
    "gaps_rows",
    "get_profile",
    "hbm_holding_usd",
    "hit_probability",
    "hit_probability_poisson",
    "keepalive_breakeven_rate",
    "keepalive_cost_rate",
    "keepalive_ping_rate",
    "kv_byte_seconds",
    "load_profiles",
    "load_provider_costs",
    "parse_ttl",
    "prefill_saved_usd",
    "provider_table",
    "reads_to_break_even",
    "relative_cost",
    "ttl_label",
    "ttl_rows",
]
