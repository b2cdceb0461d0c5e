"""Node capacity against hand-worked values."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hardware.catalog import load_catalog
from simulator.capacity import kv_budget, max_context, max_streams
from simulator.errors import ConfigError, DoesNotFitError
from simulator.kv import KVLayout, parse_layout, sequence_bytes
from simulator.models import get_model

CAT = load_catalog()
H100, B200 = CAT.node("8xH100"), CAT.node("8xB200")
L70 = get_model("Llama-3-70B")


def test_llama3_70b_on_8xh100_budget_and_streams():
    # 0.9 · 8 · 80 GB = 576 GB usable; weights 70.55e9 · 2 B = 141.1 GB -> KV 434.9 GB
    b = kv_budget(H100, L70)
    assert b.kv_bytes / 1e9 == pytest.approx(434.9, abs=0.01)
    # 434.9 GB / 42.95 GB per 131,072-token stream = 10.1 -> 10 streams ("about ten")
    assert max_streams(b, L70, None, 131_072) == 10
    # 434.9 GB / 1.342 GB per 4k stream = 324.0 -> 324 ("a few hundred")
    assert max_streams(b, L70, None, 4096) == 324


def test_tp4_gives_two_replicas_each_with_all_weights():
    b = kv_budget(H100, L70, tp=4)
    # per replica: 0.9 · 4 · 80 = 288 GB − 141.1 GB = 146.9 GB; node: 2 · 146.9 = 293.8 GB
    assert b.replicas == 2
    assert b.kv_bytes / 1e9 == pytest.approx(293.8, abs=0.01)
    # per replica floor(146.9 / 1.342) = 109 -> 218 per node
    assert max_streams(b, L70, None, 4096) == 218


def test_model_that_does_not_fit_says_by_how_much():
    # per GPU under TP8 (fp8, 1 B a weight): embeddings and LM head, in bf16 as the checkpoint keeps them,
    # 2 · 129,280 · 7,168 · 2 B / 8 = 0.463 GB; attention 61 · ((187.08M − 15.14M) / 8 + 15.14M latent
    # down-projections) = 2.235 GB; dense rest 61 · 62.70M / 8 = 0.478 GB; experts 58 · 256 · 44.04M / 8
    # = 81.738 GB: 84.915 GB vs 72 GB usable, 12.915 GB over (103.3 GB over the 8 GPUs)
    over = r"84\.9 GB \(fp8-block\).* by 12\.9 GB \(103\.3 GB over the stage's 8 GPUs\)"  # (its format: block scales)
    with pytest.raises(DoesNotFitError, match=over):
        kv_budget(H100, get_model("DeepSeek-V3"))
    with pytest.raises(ConfigError, match="'tp × pp' must be a divisor"):
        kv_budget(H100, L70, tp=3)


def test_longest_context_at_batch():
    b = kv_budget(H100, L70)
    n = max_context(b, L70, None, 8)
    # 434.9e9 / 8 / 327,680 B = 165,901 tokens, rounded down to whole 16-token blocks: 165,888
    assert n == 165_888
    assert 8 * sequence_bytes(L70, KVLayout(), n, 16) <= b.kv_bytes < 8 * sequence_bytes(L70, KVLayout(), n + 16, 16)


def test_sliding_only_model_has_no_context_limit():
    gemma_local = dataclasses.replace(get_model("Gemma-3-27B"), sliding_window_pattern=0)
    b = kv_budget(H100, gemma_local)
    assert max_context(b, gemma_local, None, 1) == 2**30


@given(st.floats(10e9, 400e9), st.floats(1e9, 200e9), st.sampled_from(["native", "fp8", "mla"]),
       st.integers(1, 1_000_000))
def test_more_hbm_never_fewer_streams(hbm, extra, text, n):
    small = dataclasses.replace(H100, gpu=dataclasses.replace(H100.gpu, hbm_bytes=hbm))
    big = dataclasses.replace(H100, gpu=dataclasses.replace(H100.gpu, hbm_bytes=hbm + extra))
    layout = parse_layout(text)

    def streams(node):
        try:
            return max_streams(kv_budget(node, L70), L70, layout, n)
        except DoesNotFitError:
            return 0

    assert streams(big) >= streams(small)


def test_b200_holds_more_than_h100():
    # 0.9 · 1440 − 141.1 = 1154.9 GB -> floor(1154.9 / 42.95) = 26 streams at 128k
    assert max_streams(kv_budget(B200, L70), L70, None, 131_072) == 26


def test_few_requests_note_says_how_many_values_a_p99_rests_on():
    """The 99th percentile of n values (linear interpolation) lies between the ``n − ⌊0.99·(n − 1)⌋`` largest:
    79 requests (0.99 x 78 = 77.2): the 2 slowest; 150 (147.5): 3; none from 200 on, nor for an empty run."""
    from simulator.planning import few_requests_note

    assert "79 requests: a p99 over them lies between its 2 slowest" in few_requests_note(79)
    assert "lies between its 3 slowest" in few_requests_note(150)
    assert few_requests_note(200) is None and few_requests_note(0) is None


def test_few_requests_note_of_an_offline_workload_asks_for_more_requests():
    """helper-132: an offline workload's length is its count: a longer --duration-s changes nothing."""
    from simulator.planning import few_requests_note

    offline = few_requests_note(50, offline=True)
    assert "more requests (an offline workload's count) would give p99s that stand" in offline
    assert "--duration-s" not in few_requests_note(50, offline=True) and "--duration-s" in few_requests_note(50)
