"""GPU and node catalogs."""

import pytest

from hardware.catalog import load_catalog
from simulator.errors import ConfigError

CAT = load_catalog()


def test_datasheet_figures():
    h100, h200, b200 = CAT.gpu("H100"), CAT.gpu("H200"), CAT.gpu("B200")
    assert (h100.hbm_bytes, h100.hbm_bytes_per_s) == (80e9, 3.35e12)
    assert (h100.bf16_flops, h100.fp8_flops) == (989.4e12, 1978.9e12)
    assert (h200.hbm_bytes, h200.hbm_bytes_per_s) == (141e9, 4.8e12)
    assert (b200.hbm_bytes, b200.hbm_bytes_per_s) == (180e9, 8e12)
    assert (b200.bf16_flops, b200.fp8_flops, b200.fp4_flops) == (2250e12, 4500e12, 9000e12)
    assert {"GB200", "B300", "MI300X", "MI355X"} <= set(CAT.gpus)


def test_every_gpu_and_node_has_a_source_and_an_8_gpu_node():
    for g in CAT.gpus.values():
        assert "read 20" in g.source, g.key
    for n in CAT.nodes.values():
        assert n.gpus in (1, 4, 8) and n.source and n.nic_bytes_per_s > 0 and n.nic_latency_s > 0, n.key
    assert {n.gpu.key for n in CAT.nodes.values() if n.gpus == 8} == set(CAT.gpus)


@pytest.mark.parametrize(("key", "gpu", "share"), [("1xH100", "H100", 1), ("4xH100", "H100", 4), ("1xH200", "H200", 1),
                                                   ("1xB200", "B200", 1)])
def test_small_nodes_are_slices_of_the_8_gpu_server(key, gpu, share):
    node, server = CAT.node(key), CAT.node(f"8x{gpu}")
    assert (node.gpu, node.gpus, node.domain_gpus) == (server.gpu, share, share)
    # host DRAM, NVMe and its bandwidth are the server's divided by 8, times the GPUs: 2 TB / 8 = 250 GB a GPU,
    # one 3.84 TB U.2 drive a GPU, 25 GB/s / 8 = 3.125 GB/s a GPU; the NIC (one 400 Gb/s per GPU) is unchanged
    assert node.host_dram_bytes == pytest.approx(share * 250e9)
    assert node.nvme_bytes == pytest.approx(share * 3.84e12)
    assert node.nvme_bytes_per_s == pytest.approx(share * 3.125e9)
    assert (node.nic_bytes_per_s, node.nic_latency_s) == (server.nic_bytes_per_s, server.nic_latency_s) == (50e9, 5e-6)
    assert node.hbm_bytes == share * server.gpu.hbm_bytes
    assert node.usd_per_hour == pytest.approx(share * server.gpu.usd_per_gpu_hour)  # e.g. 1 x 2.99, 4 x 2.99 $/h


def test_gpu_name_means_its_largest_node_whatever_the_listing_order():
    assert CAT.node("H100").key == "8xH100" and CAT.node("b200").key == "8xB200"
    assert CAT.node("4xh100").key == "4xH100"


def test_node_lookup_by_gpu_name_and_price():
    node = CAT.node("h100")
    assert node.key == "8xH100"
    assert node.usd_per_hour == pytest.approx(8 * 2.99)


def test_fp4_on_hopper_has_no_peak():
    assert not CAT.gpu("H100").has_tensor_cores("fp4") and CAT.gpu("H100").has_tensor_cores("fp16")
    with pytest.raises(ConfigError, match=r"H100 has no fp4 tensor cores .*: it computes in bf16, fp8 \(got .fp4.\)"):
        CAT.gpu("H100").peak_flops("fp4")
    assert CAT.gpu("B200").peak_flops("fp4") == 9000e12


def test_user_catalog_adds_a_gpu(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(CAT_TEXT + """
[node.4xL40S]
gpu = "L40S"
gpus = 4
host_dram_bytes = 512e9
nvme_bytes = 4e12
nvme_bytes_per_s = 7e9
source = "my server"
""")
    cat = load_catalog(f)
    assert cat.node("4xL40S").hbm_bytes == 4 * 48e9
    assert "H100" in cat.gpus  # shipped entries stay


@pytest.mark.parametrize(("body", "msg"), [
    ('[gpu.X]\nhbm = 1\n', "gpu.X: unknown key 'hbm'; valid:"),
    ('[gpu.X]\nname="x"\n', "gpu.X: missing key"),
    ('[node.Y]\ngpu = "Z"\ngpus = 8\n', "unknown GPU"),
    ('[cpu.Z]\n', "unknown table 'cpu'"),
    ('[gpu.X\n', "not valid TOML"),
])
def test_bad_catalog_files_name_file_and_key(tmp_path, body, msg):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(ConfigError, match=msg) as err:
        load_catalog(f)
    assert str(f) in str(err.value)


def test_negative_figure_rejected(tmp_path):
    f = tmp_path / "neg.toml"
    f.write_text(CAT_TEXT.replace("hbm_bytes = 48e9", "hbm_bytes = -1.0"))
    with pytest.raises(ConfigError, match=r"hbm_bytes: must be a finite number > 0 \(got -1.0\)"):
        load_catalog(f)


CAT_TEXT = """
[gpu.L40S]
name = "NVIDIA L40S"
hbm_bytes = 48e9
hbm_bytes_per_s = 0.864e12
sm_count = 142
bf16_flops = 362e12
fp8_flops = 733e12
fp4_flops = 0.0
nvlink_bytes_per_s = 32e9
nvswitch_reduce = false
pcie_bytes_per_s = 32e9
usd_per_gpu_hour = 1.0
source = "x"
"""


def test_sm_count_is_a_positive_integer(tmp_path):
    for bad in ("0", "true", "132.5"):
        f = tmp_path / "g.toml"
        f.write_text(CAT_TEXT.replace("sm_count = 142", f"sm_count = {bad}"))
        with pytest.raises(ConfigError, match="sm_count"):
            load_catalog(extra=f)
    assert load_catalog().gpu("H100").sm_count == 132


def test_l2_is_a_datasheet_figure_or_not_given(tmp_path):
    """helper-187: H100's L2 was a figure in a comment of simulator/cost/aiconfigurator.py; it is a GPU's figure
    here, with its source. A user's GPU may leave it out (0: not given); a negative or non-finite one is refused."""
    cat = load_catalog()
    assert (cat.gpu("H100").l2_bytes, cat.gpu("H200").l2_bytes, cat.gpu("B200").l2_bytes) == (50e6, 50e6, 0.0)
    f = tmp_path / "g.toml"
    f.write_text(CAT_TEXT)
    assert load_catalog(extra=f).gpu("L40S").l2_bytes == 0.0
    f.write_text(CAT_TEXT.replace("sm_count = 142", "sm_count = 142\nl2_bytes = 96e6"))
    assert load_catalog(extra=f).gpu("L40S").l2_bytes == 96e6
    f.write_text(CAT_TEXT.replace("sm_count = 142", "sm_count = 142\nl2_bytes = -1"))
    with pytest.raises(ConfigError, match=r"g\.toml: gpu\.L40S\.l2_bytes: must be a finite number >= 0 \(0: not "
                                          r"given\) \(got -1\)$"):
        load_catalog(extra=f)


def test_kvsim_hardware_shows_each_nodes_nvme_read_bandwidth():
    """helper-120: the NVMe offload tier's bandwidth was only in --json. 8xH100: 25 GB/s; 1xH100: 25 / 8."""
    from click.testing import CliRunner

    from simulator.cli import main

    r = CliRunner().invoke(main, ["hardware"])
    assert r.exit_code == 0, r.output
    rows = {line.split()[0]: line.split() for line in r.output.splitlines() if line.strip()}
    header = next(line for line in r.output.splitlines() if line.split()[:1] == ["node"])
    assert "NVMe TB  NVMe GB/s  NVLink GPUs" in header  # the sixth figure of a row: node GPUs HBM DRAM NVMe NVMe/s
    assert rows["8xH100"][5] == "25.00" and rows["1xH100"][5] == "3.12"


def test_a_nic_without_its_latency_is_refused_and_a_missing_nic_is_said_as_such(tmp_path):
    """helper-127: a catalog node with nic_bytes_per_s and no nic_latency_s moved KV with no latency (0.642 ms where
    5 us more was due), and a node with no NIC at all read 'its nic_bytes_per_s is 0.0', a value never written."""
    from simulator.errors import ConfigError

    f = tmp_path / "c.toml"
    f.write_text('[node.8xH100x]\ngpu = "H100"\ngpus = 8\nhost_dram_bytes = 2e12\nnvme_bytes = 3e13\n'
                 'nvme_bytes_per_s = 25e9\nnic_bytes_per_s = 50e9\nsource = "test"\n')
    with pytest.raises(ConfigError, match=r"node.8xH100x.nic_latency_s: must be > 0 where nic_bytes_per_s is"):
        load_catalog(f)


# Each GPU's datasheet figures as the datasheet prints them (its `source`), worked by hand to the catalog's
# dense per-GPU, per-direction units: a sparse peak is halved, an 8- or 72-GPU platform total divided by its GPUs,
# a bidirectional link halved. (HBM bytes, HBM bytes/s, bf16, fp8, fp4 FLOP/s, link bytes/s a direction)
DATASHEETS = {
    # H100 SXM5 / H200: 1,979 and 3,958 TFLOPS bf16 / fp8 with sparsity; NVLink 4 900 GB/s bidirectional
    "H100": (80e9, 3.35e12, 1978.8e12 / 2, 3957.8e12 / 2, 0.0, 900e9 / 2),
    "H200": (141e9, 4.8e12, 1978.8e12 / 2, 3957.8e12 / 2, 0.0, 900e9 / 2),
    # HGX B200: 1,440 GB, 64 TB/s (DGX B200); 36 / 72 PFLOPS bf16 / fp8 sparse, 72 fp4 dense, over 8; NVLink 5 1.8 TB/s
    "B200": (1440e9 / 8, 64e12 / 8, 36e15 / 2 / 8, 72e15 / 2 / 8, 72e15 / 8, 1.8e12 / 2),
    # GB200 NVL72: 13.4 TB, 576 TB/s; 360 / 720 / 1,440 PFLOPS bf16 / fp8 / fp4 with sparsity, over 72
    "GB200": (186e9, 576e12 / 72, 360e15 / 2 / 72, 720e15 / 2 / 72, 1440e15 / 2 / 72, 1.8e12 / 2),
    # HGX B300: 2.1 TB over 8 (270 GB); 36 / 72 PFLOPS bf16 / fp8 with sparsity, 108 PFLOPS fp4 dense, over 8;
    # 8 TB/s is the catalog's figure, as B200's (its line: the datasheet's HGX B300 column prints 7.7 TB/s)
    "B300": (2160e9 / 8, 8e12, 36e15 / 2 / 8, 72e15 / 2 / 8, 108e15 / 8, 1.8e12 / 2),
    # MI300X: 2,614.9 / 5,229.8 TFLOPS fp16 / fp8 with sparsity; 7 Infinity Fabric links x 128 GB/s bidirectional
    "MI300X": (192e9, 5.3e12, 2614.8e12 / 2, 5229.8e12 / 2, 0.0, 7 * 128e9 / 2),
    # MI355X: 5,033.2 / 10,066.4 TFLOPS fp16 / fp8 with sparsity, 10,066.3 MXFP4 dense; 7 links x 153.6 GB/s
    "MI355X": (288e9, 8e12, 5033.2e12 / 2, 10066.4e12 / 2, 10066.3e12, 7 * 153.6e9 / 2),
}


@pytest.mark.parametrize("key", sorted(DATASHEETS))
def test_every_gpu_is_its_datasheet_dense_and_per_direction(key):
    g = CAT.gpu(key)
    got = (g.hbm_bytes, g.hbm_bytes_per_s, g.bf16_flops, g.fp8_flops, g.fp4_flops, g.nvlink_bytes_per_s)
    assert got == pytest.approx(DATASHEETS[key], rel=1e-3)


def test_every_shipped_gpu_has_its_datasheet_row():
    assert set(DATASHEETS) == set(load_catalog().gpus)


@pytest.mark.parametrize(("key", "gpus", "nic_gbit"), [("8xH100", 8, 400), ("8xH200", 8, 400), ("8xB200", 8, 400),
                                                        ("8xGB200", 8, 400), ("8xB300", 8, 800), ("8xMI300X", 8, 400),
                                                        ("8xMI355X", 8, 400)])
def test_servers_have_their_gpus_and_one_nic_a_gpu(key, gpus, nic_gbit):
    # a 400 Gb/s NIC moves 400e9 / 8 = 50 GB/s each way (ConnectX-7 NDR; ConnectX-8 800 Gb/s: 100 GB/s)
    node = CAT.node(key)
    assert (node.gpus, node.nic_bytes_per_s) == (gpus, nic_gbit * 1e9 / 8)
    assert node.hbm_bytes == gpus * node.gpu.hbm_bytes
