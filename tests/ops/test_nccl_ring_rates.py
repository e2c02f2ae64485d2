"""NCCL's Simple ring as AIConfigurator's NCCL 2.29.2 rows show it (perfmodel.validation.collectives
ring_bandwidth_fit): time = fixed + sent / link + (S/G) / local."""
import pytest

import perfmodel as pm
from perfmodel.validation import collectives

MiB = 1 << 20


def synthetic(collective, fixed_s, link, local, gpus=(2, 4, 8)):
    rows = []
    for g in gpus:
        for s in (64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB):
            sent = collectives.RING_SEND_FACTOR[collective] * (g - 1) / g * s
            rows.append({"id": f"x-{g}-{s}", "hardware": "B200", "collective": collective,
                         "gpus": g, "bytes": float(s),
                         "measured_s": fixed_s + sent / link + s / g / local})
    return rows


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reduce_scatter"])
def test_the_fit_recovers_a_hand_built_ring(collective):
    rows = synthetic(collective, 25e-6, 700e9, 1.2e12)
    fixed, link, local = collectives.ring_bandwidth_fit(rows)
    assert (fixed, link, local) == pytest.approx((25e-6, 700e9, 1.2e12), rel=1e-6)
    fixed, link, local = collectives.ring_bandwidth_fit(rows, link_rate=700e9)
    assert (fixed, link, local) == pytest.approx((25e-6, 700e9, 1.2e12), rel=1e-6)


def test_the_local_step_costs_two_gpus_most():
    """At one size, the S/G step is half the 2-GPU all-gather's extra time and an eighth of the
    8-GPU one's: the busbw of 2 GPUs sits furthest below the link."""
    rows = synthetic("allgather", 0.0, 700e9, 1.2e12)
    busbw = {r["gpus"]: (r["gpus"] - 1) / r["gpus"] * r["bytes"] / r["measured_s"]
             for r in rows if r["bytes"] == 512 * MiB}
    assert busbw[2] < busbw[4] < busbw[8] < 700e9
    assert busbw[2] == pytest.approx(1 / (1 / 700e9 + 1 / 1.2e12))  # 0.5 S/link + 0.5 S/local


def test_one_gpu_count_cannot_separate_the_local_step():
    with pytest.raises(ValueError, match="two GPU counts"):
        collectives.ring_bandwidth_fit(synthetic("allgather", 0.0, 700e9, 1e12, gpus=(8,)))


@pytest.fixture(scope="module")
def nccl_rows():
    return collectives.load_nccl_rows()


def test_the_ring_rows_leave_out_nvls_and_small_messages(nccl_rows):
    sel = collectives.ring_rows(nccl_rows, "B200", "allreduce")
    assert {r["gpus"] for r in sel} == {2, 4}
    assert min(r["bytes"] for r in sel) == collectives.RING_FIT_MIN_BYTES
    assert len(collectives.ring_rows(nccl_rows, "B200", "allgather")) == 12


@pytest.mark.parametrize("gpu", ["H100-SXM", "H200-SXM", "B200", "B300", "GB200", "GB300"])
def test_large_all_gathers_run_at_nccls_link_rate_plus_a_local_step(nccl_rows, gpu):
    """Fitted freely, the ring's link rate is the one NCCL's topology gives the NVLink (18 x 20.6
    or 18 x 40.1 GB/s) within 10 %, on Hopper and Blackwell alike, and the local step runs at
    0.5-3 TB/s: a GPU-count-dependent share of each chunk loop, not a slower link, is what
    leaves 2-GPU rings ~25 % below the link."""
    hw = pm.hardware(gpu)
    _, link, local = collectives.ring_bandwidth_fit(
        collectives.ring_rows(nccl_rows, gpu, "allgather"))
    assert link == pytest.approx(collectives.ring_link_rate(hw), rel=0.10)
    assert 0.5e12 < local < 3e12


def test_the_report_groups_by_family_then_gpu_count(nccl_rows):
    few = [r for r in nccl_rows if r["hardware"] == "H100-SXM" and r["collective"] == "allgather"
           and r["bytes"] in (512.0, 512.0 * MiB)]
    text = collectives.nccl_report(few)
    assert "[hopper]" in text and "H100-SXM" in text and ">4MiB" in text
    assert text.index("[hopper]") < text.index("H100-SXM")
