"""Trace readers on small files the tests write: formats, round trip, bad rows."""

from pathlib import Path

import numpy as np
import pytest

from simulator.errors import ConfigError
from workloads.load import load_workload
from workloads.traces import detect_format, read_trace, write_workload
from workloads.traces._rows import SKIP_HINT
from workloads.traces.mooncake import block_segments

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:16:46.6805900,1000,7
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_azure_reads_seven_digit_timestamps_relative_to_first_row(tmp_path: Path) -> None:
    w = read_trace(write(tmp_path, "azure.csv", AZURE))
    reqs = w.requests()
    assert [r.arrival_s for r in reqs] == pytest.approx([0.0, 4.314579, 60.0])
    assert [(r.prompt_tokens, r.output_tokens) for r in reqs] == [(374, 44), (396, 109), (1000, 7)]
    assert len({r.segments[0][0] for r in reqs}) == 3  # no sharing known
    assert w.summary().prompt_tokens.mean == pytest.approx((374 + 396 + 1000) / 3)


def test_azure_bad_row_stops_with_file_line_field(tmp_path: Path) -> None:
    p = write(tmp_path, "azure.csv", AZURE.replace("396,109", "abc,109"))
    with pytest.raises(ConfigError) as e:
        read_trace(p).requests()
    assert str(e.value) == f"azure.csv:3: 'ContextTokens' must be an integer >= 0 (got 'abc'); {SKIP_HINT}"
    # a row short of a field: said so, not "'GeneratedTokens' must be present (got None)" (helper-115)
    p = write(tmp_path, "short.csv", AZURE.replace("396,109", "396"))
    with pytest.raises(ConfigError) as e:
        read_trace(p).requests()
    assert str(e.value) == f"short.csv:3: 'GeneratedTokens' has no value in the row; {SKIP_HINT}"
    # a header without a column the format needs: the file's error, not each row's (helper-128)
    lines = AZURE.splitlines()
    p = write(tmp_path, "nocol.csv", "\n".join(line.rsplit(",", 1)[0] for line in lines) + "\n")
    with pytest.raises(ConfigError) as e:
        read_trace(p, format="azure").requests()
    assert str(e.value) == ("nocol.csv: the header lacks column 'GeneratedTokens' (azure needs TIMESTAMP, "
                            "ContextTokens, GeneratedTokens; got 'TIMESTAMP, ContextTokens')")
    # kvsim's own format too (helper-150: each row read as short of 'source', and --skip-bad-rows skipped them all)
    p = write(tmp_path, "nat.csv", "id,arrival_s,prompt_tokens,output_tokens,segments\n0,0.0,10,5,1:10\n")
    with pytest.raises(ConfigError) as e:
        read_trace(p).requests()
    assert str(e.value) == ("nat.csv: the header lacks column 'session_id' (kvsim's own format needs id, arrival_s, "
                            "session_id, turn, prompt_tokens, output_tokens, output_segment_id, segments, "
                            "cache_breakpoints, source; got 'id, arrival_s, prompt_tokens, output_tokens, segments')")


def test_bad_rows_skipped_and_counted(tmp_path: Path) -> None:
    text = AZURE.replace("396,109", "abc,109").replace("1000,7", "1000,0")
    w = read_trace(write(tmp_path, "azure.csv", text), on_error="skip")
    assert w.skipped_rows is None
    assert len(w.requests()) == 1
    assert w.skipped_rows == 2
    assert w.summary().skipped_rows == 2
    with pytest.raises(ConfigError, match="'on_error' must be 'stop' or 'skip'"):
        read_trace(write(tmp_path, "a.csv", AZURE), on_error="ignore")


def test_time_going_backwards_is_a_bad_row(tmp_path: Path) -> None:
    text = AZURE.replace("2023-11-16 18:16:46.6805900", "2023-11-16 18:15:47.0000000")
    with pytest.raises(ConfigError, match=r"azure.csv:4: 'TIMESTAMP' must be >= the previous row's"):
        read_trace(write(tmp_path, "azure.csv", text)).requests()
    # before the first row (times are read relative to it): said in plain words (it read "must be not before")
    text = AZURE.replace("2023-11-16 18:15:50.9951690", "2023-11-16 18:15:40.0000000")
    with pytest.raises(ConfigError) as e:
        read_trace(write(tmp_path, "azure.csv", text)).requests()
    assert str(e.value) == ("azure.csv:3: 'TIMESTAMP' must be at or after the first row's "
                            f"(got '2023-11-16 18:15:40.0000000'); {SKIP_HINT}")


def test_mooncake_blocks_and_remainder(tmp_path: Path) -> None:
    assert block_segments([1, 2, 3], 1100, -9) == ((1, 512), (2, 512), (3, 76))
    assert block_segments([1, 2, 3], 600, -9) == ((1, 512), (2, 88))  # ids past the end dropped
    assert block_segments([1], 700, -9) == ((1, 512), (-9, 188))  # uncovered tokens: own segment
    text = (
        '{"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]}\n'
        '{"timestamp": 2500, "input_length": 1024, "output_length": 6, "hash_ids": [1, 2]}\n'
        '{"timestamp": 3000, "input_length": 600, "output_length": 7, "hash_ids": [1, 4]}\n'
    )
    w = read_trace(write(tmp_path, "m.jsonl", text))
    reqs = w.requests()
    assert [r.arrival_s for r in reqs] == [0.0, 2.5, 3.0]
    s = w.summary()
    # hits: 0, then 1024 (blocks 1,2), then 512 (block 1) of 1100 + 1024 + 600
    assert s.prefix_hit_share == pytest.approx(1536 / 2724)
    assert s.reuse_gap_s.mean == pytest.approx((2.5 + 2.5 + 0.5) / 3)


def test_mooncake_blocks_match_a_block_by_block_walk() -> None:
    """`block_segments` (whole blocks sliced, in C) against the rule walked block by block, over random id
    counts and prompt lengths around the block edges: each id takes min(512, tokens left), ids past the end
    are dropped, tokens no id covers are one segment of their own."""

    def walked(hash_ids: list[int], n: int, unique: int) -> tuple[tuple[int, int], ...]:
        out, left = [], n
        for h in hash_ids:
            if left <= 0:
                break
            out.append((h, min(512, left)))
            left -= out[-1][1]
        return tuple([*out, (unique, left)] if left > 0 else out)

    rng = np.random.default_rng(0)
    lengths = [1, 511, 512, 513, 1023, 1024, 1025, *rng.integers(1, 20_000, 200).tolist()]
    for n in lengths:
        for ids in (0, 1, n // 512, n // 512 + 1, n // 512 + 3, int(rng.integers(0, 50))):
            hash_ids = rng.integers(0, 10**12, ids).tolist()
            assert block_segments(hash_ids, n, -7) == walked(hash_ids, n, -7), (ids, n)


def test_mooncake_bad_json_and_field(tmp_path: Path) -> None:
    p = write(tmp_path, "m.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 1}\n{oops\n')
    with pytest.raises(ConfigError, match=r"^m.jsonl:2: 'row' must be a JSON object"):
        read_trace(p).requests()
    p = write(tmp_path, "n.jsonl", '{"timestamp": 0, "input_length": 0, "output_length": 1}\n')
    with pytest.raises(ConfigError, match=r"^n.jsonl:1: 'input_length' must be an integer >= 1 \(got 0\); skip "):
        read_trace(p).requests()


def test_burstgpt_drops_failures_counted(tmp_path: Path) -> None:
    text = (
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "8,GPT-4,1000,0,1000,Conversation log\n"
        "9.5,ChatGPT,30,200,230,API log\n"
    )
    p = write(tmp_path, "burst.csv", text)
    assert detect_format(p) == "burstgpt"
    w = read_trace(p)
    reqs = w.requests()
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in reqs] == [(0.0, 472, 18), (4.5, 30, 200)]
    assert w.skipped_rows == 1
    assert reqs[0].source == "burstgpt:ChatGPT"


def test_burstgpt_and_azure_count_time_from_the_first_row_even_a_dropped_one(tmp_path: Path) -> None:
    """helper-196: a BurstGPT trace opening with a failed row counted time from the next row (its one request at 0 s)
    where Azure's counts from the first row, dropped or not (4 s); a dropped row out of order was not refused."""
    burst = write(tmp_path, "b.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                                     "10,ChatGPT,100,0,100,Conversation log\n14,ChatGPT,30,200,230,API log\n")
    azure = write(tmp_path, "a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:10,0,5\n"
                                     "2023-11-16 18:15:14,30,200\n")
    for p in (burst, azure):
        w = read_trace(p)
        assert [(r.arrival_s, r.prompt_tokens) for r in w.requests()] == [(4.0, 30)] and w.skipped_rows == 1
    late = write(tmp_path, "c.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                                    "10,ChatGPT,100,20,120,Conversation log\n9,ChatGPT,30,0,30,API log\n")
    with pytest.raises(ConfigError, match=r"^c\.csv:3: 'Timestamp' must be >= the first row's \(10\.0\)"):
        read_trace(late).requests()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_own_format_round_trips_exactly(tmp_path: Path, suffix: str) -> None:
    w = load_workload({"name": "chat-4k"}, seed=3, duration_s=120)
    original = w.requests()
    path = tmp_path / f"w{suffix}"
    assert write_workload(w, path) == len(original) > 10
    assert detect_format(path) == "kvsim"
    assert read_trace(path).requests() == original


def test_own_format_bad_segments(tmp_path: Path) -> None:
    text = (
        "id,arrival_s,session_id,turn,prompt_tokens,output_tokens,output_segment_id,segments,"
        "cache_breakpoints,source\n0,0.0,-1,0,10,1,-1,7:x,,t\n"
    )
    with pytest.raises(ConfigError, match=r"^w.csv:2: 'segments' must be 'id:tokens;id:tokens'"):
        read_trace(write(tmp_path, "w.csv", text)).requests()


def test_undetectable_and_missing(tmp_path: Path) -> None:
    headers = ("; a trace starts with a CSV header (azure: TIMESTAMP, ContextTokens, GeneratedTokens; burstgpt: "
               "Request tokens, Response tokens; kvsim: segments) or a JSON line (kvsim: segments; mooncake: "
               "input_length)")
    with pytest.raises(ConfigError) as exc:
        read_trace(write(tmp_path, "x.csv", "a,b\n1,2\n"))
    assert str(exc.value) == "x.csv: unknown trace format (first line 'a,b')" + headers
    with pytest.raises(ConfigError) as exc:  # it said "'format' must be detectable (got ''); pass format= ..."
        read_trace(write(tmp_path, "empty.csv", ""))
    assert str(exc.value) == "empty.csv: empty file" + headers
    with pytest.raises(ConfigError) as exc:  # a blank first line is no empty file
        read_trace(write(tmp_path, "blank.csv", "\nTIMESTAMP,ContextTokens,GeneratedTokens\n"))
    assert str(exc.value) == "blank.csv: unknown trace format (first line '')" + headers
    with pytest.raises(ConfigError, match="'path' must be an existing file"):
        read_trace(tmp_path / "none.csv")
    p = write(tmp_path, "x.txt", AZURE)
    assert len(read_trace(p, format="azure").requests()) == 3


def test_zero_token_rows_are_dropped_by_rule_and_counted(tmp_path: Path) -> None:
    text = ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,4\n"
            "2023-11-16 18:15:47.0000000,0,4\n2023-11-16 18:15:48.0000000,50,0\n2023-11-16 18:15:49.0000000,7,7\n")
    wl = read_trace(write(tmp_path, "azure.csv", text))
    assert [r.prompt_tokens for r in wl.requests()] == [100, 7]
    assert wl.summary().skipped_rows == 2


def test_byte_order_mark_and_non_utf8_files(tmp_path: Path) -> None:
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,4\n")
    assert [r.prompt_tokens for r in read_trace(bom).requests()] == [100]
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage\n")
    with pytest.raises(ConfigError, match=r"bin\.csv: not UTF-8 text"):
        read_trace(binary)


@pytest.mark.parametrize("header", ['"TIMESTAMP","ContextTokens","GeneratedTokens"',
                                    "TIMESTAMP, ContextTokens, GeneratedTokens"])
def test_a_quoted_or_spaced_header_reads_as_the_plain_one(tmp_path: Path, header: str) -> None:
    # helper-179: a quoted header (pandas' QUOTE_ALL, a spreadsheet's export) was "unknown trace format"; one with
    # spaces after its commas was detected as azure, then "the header lacks column 'ContextTokens'"
    p = write(tmp_path, "a.csv", AZURE.replace("TIMESTAMP,ContextTokens,GeneratedTokens", header))
    assert detect_format(p) == "azure"
    reqs = read_trace(p).requests()
    assert [(r.prompt_tokens, r.output_tokens) for r in reqs] == [(374, 44), (396, 109), (1000, 7)]
    assert [r.arrival_s for r in reqs] == pytest.approx([0.0, 4.314579, 60.0])


@pytest.mark.parametrize(("written", "saved_as"), [(".jsonl", ".json"), (".jsonl", ".txt"), (".csv", ".jsonl"),
                                                   (".csv", ".txt")])
def test_own_format_is_read_by_what_the_file_holds_not_its_suffix(tmp_path: Path, written: str,
                                                                  saved_as: str) -> None:
    # helper-179: kvsim's JSONL saved as .json was detected as kvsim, then read as CSV: "the header lacks column
    # 'id'" of a line that has it; a CSV named .jsonl (Azure's or kvsim's) was "unknown trace format"
    w = load_workload({"name": "chat-4k"}, seed=3, duration_s=60)
    original = w.requests()
    path = tmp_path / f"w{written}"
    write_workload(w, path)
    path = path.rename(tmp_path / f"w{saved_as}")
    assert detect_format(path) == "kvsim"
    assert read_trace(path).requests() == original and len(original) == 47
    azure = write(tmp_path, "azure.jsonl", AZURE)
    assert detect_format(azure) == "azure"
    assert [r.prompt_tokens for r in read_trace(azure).requests()] == [374, 396, 1000]


def test_own_format_ids_count_the_kept_rows_so_each_request_has_its_own(tmp_path: Path) -> None:
    # helper-179: ids were taken from the file; two files concatenated repeat them, and a run's `source` column
    # (kept by id) then labelled request 0 of class 'a' as 'b'
    header = ("id,arrival_s,session_id,turn,prompt_tokens,output_tokens,output_segment_id,segments,"
              "cache_breakpoints,source\n")
    rows = "0,0.5,0,0,10,5,99,7:10,1,a\n0,0.6,1,0,10,5,98,8:10,1,b\n7,0.7,2,0,10,5,97,9:10,1,b\n"
    reqs = read_trace(write(tmp_path, "k.csv", header + rows)).requests()
    assert [(r.id, r.arrival_s, r.source) for r in reqs] == [(0, 0.5, "a"), (1, 0.6, "b"), (2, 0.7, "b")]
    from simulator.engine.traffic import TrafficClasses

    classes = TrafficClasses()
    assert list(classes.tag(reqs)) == reqs
    assert [classes.of(i) for i in range(3)] == ["a", "b", "b"]
    with pytest.raises(ConfigError, match=r"^k2.csv:2: 'id' must be an integer >= 0 \(got '-1'\)"):
        read_trace(write(tmp_path, "k2.csv", header + "-1,0.5,0,0,10,5,99,7:10,1,a\n")).requests()


def test_own_format_jsonl_opening_with_a_blank_line_reads_as_json_lines(tmp_path: Path) -> None:
    # helper-181: read_native chose JSON lines by the first line alone, so a .jsonl file opening with a blank line,
    # read with format="kvsim" (kvsim workload describe --format kvsim), was read as CSV: "the row has 10 fields,
    # the header 0" (before it read by the suffix, and skipped the blank line as the JSON reader does)
    w = load_workload({"name": "chat-4k"}, seed=1, duration_s=10)
    path = tmp_path / "w.jsonl"
    write_workload(w, path)
    path.write_text("\n\n" + path.read_text())
    reqs = read_trace(path, format="kvsim").requests()
    assert reqs == w.requests() and len(reqs) == 7


def test_a_jsonl_trace_opening_with_blank_lines_is_detected_by_its_first_json_line(tmp_path: Path) -> None:
    # helper-185: the readers pass blank lines over (5e69cef for format="kvsim"), but detection read the first line
    # alone: a kvsim or Mooncake JSONL file opening with one was "unknown trace format (first line '')"
    w = load_workload({"name": "chat-4k"}, seed=1, duration_s=10)
    path = tmp_path / "w.json"
    write_workload(w, tmp_path / "w.jsonl")
    path.write_text("\n \n" + (tmp_path / "w.jsonl").read_text())
    assert read_trace(path).requests() == w.requests()
    row = '{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1]}'
    mooncake = write(tmp_path, "m.jsonl", f"\n{row}\n")
    assert [r.prompt_tokens for r in read_trace(mooncake)] == [100]
    with pytest.raises(ConfigError, match=r"^c\.csv: unknown trace format \(first line ''\)"):  # a CSV's header leads
        read_trace(write(tmp_path, "c.csv", "\nTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,374,44\n"))
