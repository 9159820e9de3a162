"""The device model alone: each instruction's function and cycle count on small hand-written
programs, the lane layout of local memory, dependency-token ordering, illegal programs.

Expected values are computed by hand (cycles from the chip's public figures and
the documented latencies) or with plain numpy on the same data.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from tpu_xdsl.device.chip import BM1684X, CV183X
from tpu_xdsl.device.isa import (
    Compute,
    DdrView,
    DmaCopy,
    DmaFill,
    DmaLoad,
    DmaStore,
    IllegalProgramError,
    LocalTensor,
)
from tpu_xdsl.device.simulator import Device, schedule
from tpu_xdsl.device.timing import cycles, ideal_compute_cycles


def local(addr: int, dtype: str, view: tuple[int, ...]) -> LocalTensor:
    n, c, h, w = view if len(view) == 4 else (1, view[0], 1, int(np.prod(view[1:])))
    return LocalTensor(addr, dtype, (n, c, h, w), view)


# -- memory ---------------------------------------------------------------------------------


def test_channels_go_round_the_lanes_each_plane_aligned_to_the_execution_units():
    device = Device(BM1684X, 1 << 16)
    x = np.arange(2 * 70 * 3 * 5, dtype=np.int32).reshape(2, 70, 3, 5)
    tensor = LocalTensor(128, "int32", (2, 70, 3, 5), (2, 70, 3, 5))
    device.write_local(tensor, x)
    # 70 channels on 64 lanes: two planes per lane; a plane of 15 int32 (60 bytes) takes 64.
    assert tensor.lane_bytes(64, 64) == 2 * 2 * 64
    lane5 = device.lmem[5, 128 : 128 + 256].view(np.int32).reshape(2, 2, 16)
    np.testing.assert_array_equal(lane5[0, 0, :15], x[0, 5].ravel())  # channel 5, image 0
    np.testing.assert_array_equal(lane5[1, 1, :15], x[1, 69].ravel())  # channel 64 + 5 = 69, image 1
    np.testing.assert_array_equal(device.read_local(tensor), x)


def test_dma_moves_strided_views_and_fills():
    device = Device(BM1684X, 4096)
    x = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    device.write_ddr(DdrView.contiguous(0, "int16", x.shape), x)
    # A transposing copy: read through permuted strides, write contiguously.
    src = DdrView.contiguous(0, "int16", x.shape).permuted((2, 0, 1))
    dst = DdrView.contiguous(1024, "int16", (4, 2, 3))
    fill = DdrView.contiguous(2048, "int16", (5,))
    device.execute([DmaCopy(0, src, dst), DmaFill(1, fill, -3.0)])
    np.testing.assert_array_equal(device.read_ddr(dst), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(device.read_ddr(fill), [-3] * 5)
    # A broadcast: stride 0.
    wide = DdrView(0, "int16", (3, 4), (0, 1))
    np.testing.assert_array_equal(device.read_ddr(wide), np.tile(x[0, 0], (3, 1)))


def test_load_compute_store_equals_the_kernel():
    device = Device(BM1684X, 1 << 16)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (1, 8, 4, 4)).astype(np.int8)
    b = rng.integers(-128, 128, (1, 8, 4, 4)).astype(np.int8)
    da, db, dy = (DdrView.contiguous(addr, "int8", a.shape) for addr in (0, 256, 512))
    device.write_ddr(da, a)
    device.write_ddr(db, b)
    la, lb, ly = (local(addr, "int8", a.shape) for addr in (0, 64, 128))
    attrs = {"multiplier": [1 << 30, 1 << 30], "rshift": [31]}  # (a + b) / 2
    program = [
        DmaLoad(0, da, la),
        DmaLoad(1, db, lb),
        Compute(2, "add", (la, lb), (ly,), attrs, deps=(0, 1)),
        DmaStore(3, ly, dy, deps=(2,)),
    ]
    device.execute(program)
    total = a.astype(np.int64) + b
    expected = np.sign(total) * ((np.abs(total) + 1) // 2)  # half away from zero
    np.testing.assert_array_equal(device.read_ddr(dy), expected)


def test_a_loaded_program_runs_again_on_new_data():
    """`Device.load` checks and binds a program once; each run reads DDR as it is then."""
    device = Device(BM1684X, 1 << 12)
    src, dst = DdrView.contiguous(0, "int8", (1, 70, 2, 3)), DdrView.contiguous(1024, "int8", (1, 70, 2, 3))
    staged = local(0, "int8", (1, 70, 2, 3))  # 70 channels: a whole plane of 64 lanes and 6 more
    program = device.load([DmaLoad(0, src, staged), DmaStore(1, staged, dst, deps=(0,))])
    rng = np.random.default_rng(1)
    for _ in range(2):
        x = rng.integers(-128, 128, (1, 70, 2, 3)).astype(np.int8)
        device.write_ddr(src, x)
        program.run()
        np.testing.assert_array_equal(device.read_ddr(dst), x)


def test_a_program_is_checked_when_it_loads():
    device = Device(BM1684X, 4096)
    outside = DdrView.contiguous(4000, "int8", (1, 64, 2, 2))
    with pytest.raises(IllegalProgramError, match=r"instruction 1 \(DmaLoad"):
        device.load([DmaFill(0, DdrView.contiguous(0, "int8", (4,)), 1.0),
                     DmaLoad(1, outside, local(0, "int8", (1, 64, 2, 2)))])


# -- timing ---------------------------------------------------------------------------------


def test_dma_cycles_from_bandwidth_and_latency():
    load = DmaLoad(0, DdrView.contiguous(0, "int8", (1, 64, 56, 56)), local(0, "int8", (1, 64, 56, 56)))
    # 200,704 bytes at 58 bytes per cycle (58 GB/s at 1 GHz), rounded up, plus 200 cycles
    assert cycles(BM1684X, load) == 200 + math.ceil(200704 / 58)
    store = DmaStore(0, local(0, "float32", (1, 4, 8, 8)), DdrView.contiguous(0, "float32", (1, 4, 8, 8)))
    assert cycles(BM1684X, store) == 200 + math.ceil(1024 / 44)
    # cv183x: 4 GB/s at 650 MHz
    assert cycles(CV183X, load) == 300 + math.ceil(200704 / (4e9 / 650e6))


def test_conv_cycles_round_channels_up_to_lanes_and_input_channels_to_the_array():
    x = local(0, "int8", (1, 96, 28, 28))
    w = local(0, "int8", (80, 96, 3, 3))
    y = local(0, "int8", (1, 80, 28, 28))
    conv = Compute(0, "conv", (x, w, None), (y,), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
    # INT8 on bm1684x: 64 lanes x 64 input channels x 4 pixels. 80 output channels take 2
    # lane passes, 96 input channels 2 array passes; 9 taps; 784 pixels / 4 = 196.
    assert cycles(BM1684X, conv) == 64 + 2 * 2 * 9 * 196
    depthwise = Compute(0, "conv", (x, local(0, "int8", (96, 1, 3, 3)), None), (local(0, "int8", (1, 96, 28, 28)),),
                        {"kernel_shape": [3, 3], "group": 96})
    # one multiply-add per tap on the lanes: 2 channel passes x 9 taps x 784 / 64 int8 per EU
    assert cycles(BM1684X, depthwise) == 64 + 2 * 9 * math.ceil(784 / 64)
    add = Compute(0, "add", (y, y), (y,), {})
    assert cycles(BM1684X, add) == 64 + 2 * 2 * math.ceil(784 / 64)  # 2 passes


def test_the_bound_per_op_kind_runs_a_depthwise_mac_on_the_vector_path():
    x = local(0, "int8", (1, 96, 28, 28))
    y = local(0, "int8", (1, 80, 28, 28))
    macs = 80 * 96 * 9 * 784
    conv = Compute(0, "conv", (x, local(0, "int8", (80, 96, 3, 3)), None), (y,), {"kernel_shape": [3, 3]}, macs=macs)
    # the array's peak, INT8 on bm1684x: 16,384 MACs per cycle, no rounding to lanes
    assert ideal_compute_cycles(BM1684X, conv) == macs / 16384
    depthwise = Compute(0, "conv", (x, local(0, "int8", (96, 1, 3, 3)), None), (local(0, "int8", (1, 96, 28, 28)),),
                        {"kernel_shape": [3, 3], "group": 96}, macs=96 * 9 * 784)
    # the vector path: 64 lanes x 64 int8 per execution unit = 4,096 MACs per cycle
    assert ideal_compute_cycles(BM1684X, depthwise) == 96 * 9 * 784 / 4096
    add = Compute(0, "add", (y, y), (y,), {})
    assert ideal_compute_cycles(BM1684X, add) == 2 * 80 * 784 / 4096  # 2 passes over 80 x 784 elements


def test_copy_fill_matmul_pool_and_table_cycles():
    # A DDR -> DDR copy of 6,000 bytes at the slower direction (44 bytes per cycle), a fill at
    # the local -> DDR rate.
    copy = DmaCopy(0, DdrView.contiguous(0, "int16", (3000,)), DdrView.contiguous(8192, "int16", (3000,)))
    assert cycles(BM1684X, copy) == 200 + math.ceil(6000 / 44)
    fill = DmaFill(0, DdrView.contiguous(0, "float32", (100,)), 0.0)
    assert cycles(BM1684X, fill) == 200 + math.ceil(400 / 44)
    # matmul [128, 256] x [256, 100] in BF16: 100 columns on 64 lanes (2 passes), 256 / 32 IC
    # per pass (8), 128 rows / 4 pixels (32).
    a, b, y = local(0, "bfloat16", (128, 256)), local(0, "bfloat16", (256, 100)), local(0, "bfloat16", (128, 100))
    assert cycles(BM1684X, Compute(0, "matmul", (a, b, None), (y,), {})) == 64 + 2 * 8 * 32
    # 3x3 max pool on cv183x: a pass per tap, 40 channels on 32 lanes (2), 14*14 int8 outputs
    # per lane in 16-byte execution units (13).
    x, p = local(0, "int8", (1, 40, 28, 28)), local(0, "int8", (1, 40, 14, 14))
    pool = Compute(0, "max_pool", (x,), (p,), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    assert cycles(CV183X, pool) == 64 + 9 * 2 * math.ceil(196 / 16)
    table = Compute(0, "lut", (x, local(0, "int8", (1, 1, 1, 256))), (x,), {})
    assert cycles(CV183X, table) == 64 + 1 * 2 * math.ceil(784 / 16)
    # A global average pool is a reduction: one pass over its 28*28 inputs per plane (49
    # execution units of 16 int8), not 784 passes over one output pixel.
    g = local(0, "int8", (1, 40, 1, 1))
    gap = Compute(0, "avg_pool", (x,), (g,), {"kernel_shape": [28, 28], "strides": [1, 1], "pads": [0, 0, 0, 0]})
    assert cycles(CV183X, gap) == 64 + 2 * math.ceil(784 / 16)


def test_pool_table_matmul_and_cast_on_the_device_equal_numpy():
    """Each kernel family through the device (lanes, DMA and all) against plain numpy."""
    device = Device(CV183X, 1 << 16)
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (1, 40, 6, 6)).astype(np.int8)
    table = rng.integers(-128, 128, 256).astype(np.int8)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 3)).astype(np.float32)
    dx, dt, da, db = (DdrView.contiguous(addr, dtype, v.shape) for addr, dtype, v in
                      ((0, "int8", x), (2048, "int8", table), (4096, "float32", a), (8192, "float32", b)))
    for view, value in ((dx, x), (dt, table), (da, a), (db, b)):
        device.write_ddr(view, value)
    # lane bytes on cv183x (16-byte EUs): x 2 planes of 48, the table 256, pool 2 x 16, ...
    lx, lt = local(0, "int8", x.shape), LocalTensor(128, "int8", (1, 1, 1, 256), (256,))
    lp, ly = local(384, "int8", (1, 40, 3, 3)), local(448, "int8", x.shape)
    la, lb, lm = (
        local(576, "float32", a.shape),
        LocalTensor(640, "float32", (1, 7, 1, 3), b.shape),
        local(704, "float32", (5, 3)),
    )
    lh = local(768, "bfloat16", (5, 3))
    out = {name: DdrView.contiguous(12288 + 2048 * k, t.dtype, t.view) for k, (name, t) in
           enumerate((("pool", lp), ("lut", ly), ("matmul", lm), ("cast", lh)))}
    program = [
        DmaLoad(0, dx, lx), DmaLoad(1, dt, lt), DmaLoad(2, da, la), DmaLoad(3, db, lb),
        Compute(4, "max_pool", (lx,), (lp,), {"kernel_shape": [2, 2], "strides": [2, 2]}, deps=(0,)),
        Compute(5, "lut", (lx, lt), (ly,), {}, deps=(0, 1)),
        Compute(6, "matmul", (la, lb, None), (lm,), {}, deps=(2, 3)),
        Compute(7, "cast", (lm,), (lh,), {}, deps=(6,)),
        DmaStore(8, lp, out["pool"], deps=(4,)), DmaStore(9, ly, out["lut"], deps=(5,)),
        DmaStore(10, lm, out["matmul"], deps=(6,)), DmaStore(11, lh, out["cast"], deps=(7,)),
    ]
    device.execute(program)
    np.testing.assert_array_equal(device.read_ddr(out["pool"]), x.reshape(1, 40, 3, 2, 3, 2).max(axis=(3, 5)))
    # the chip indexes a table by the byte: two's complement, -1 is entry 255
    np.testing.assert_array_equal(device.read_ddr(out["lut"]), table[x.astype(np.int64) % 256])
    np.testing.assert_allclose(device.read_ddr(out["matmul"]), a @ b, rtol=1e-6)
    np.testing.assert_array_equal(device.read_ddr(out["cast"]), (a @ b).astype(ml_dtypes.bfloat16))


# -- dependency tokens --------------------------------------------------------------------------


def test_engines_overlap_and_wait_for_their_tokens():
    big = DdrView.contiguous(0, "int8", (1, 64, 64, 64))
    tensor = local(0, "int8", (1, 64, 64, 64))
    out = local(4096, "int8", (1, 64, 64, 64))
    program = [
        DmaLoad(0, big, tensor),
        Compute(1, "relu", (tensor,), (out,), {}, deps=(0,)),
        DmaLoad(2, big, local(8192, "int8", (1, 64, 64, 64))),  # independent: runs during the compute
        DmaStore(3, out, DdrView.contiguous(1 << 18, "int8", (1, 64, 64, 64)), deps=(1,)),
    ]
    timeline = schedule(BM1684X, program)
    load, compute, load2, store = timeline.scheduled
    assert compute.start == load.finish
    assert load2.start == load.finish  # the DMA queue is free; no token to wait for
    assert store.start == max(compute.finish, load2.finish)
    assert timeline.total_cycles == store.finish


def test_a_missing_token_reads_stale_memory():
    """Reads happen when an instruction starts, writes when it finishes: without its token
    the compute starts at cycle 0 and sees the local memory before the load lands."""
    device = Device(BM1684X, 1 << 16)
    x = np.full((1, 4, 8, 8), 7, dtype=np.int8)
    src, dst = DdrView.contiguous(0, "int8", x.shape), DdrView.contiguous(4096, "int8", x.shape)
    device.write_ddr(src, x)
    tensor, out = local(0, "int8", x.shape), local(128, "int8", x.shape)

    def program(deps):
        return [DmaLoad(0, src, tensor), Compute(1, "relu", (tensor,), (out,), {}, deps=deps),
                DmaStore(2, out, dst, deps=(1,))]

    device.execute(program(deps=()))
    assert np.all(device.read_ddr(dst) == 0)
    device.execute(program(deps=(0,)))
    assert np.all(device.read_ddr(dst) == 7)


# -- illegal programs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instruction", "fragment"),
    [
        (DmaLoad(0, DdrView.contiguous(4000, "int8", (200,)), local(0, "int8", (1, 200))), "outside the 4096 bytes"),
        (DmaLoad(0, DdrView.contiguous(0, "int8", (64,)), local(32, "int8", (1, 64))), "not aligned to the 64-byte"),
        (DmaLoad(0, DdrView.contiguous(0, "int8", (4096,)), LocalTensor(262144 - 64, "int8", (1, 1, 1, 4096), (4096,))),
         "does not fit the 262144 bytes of a lane"),
        (DmaStore(0, local(0, "float32", (1, 2)), DdrView.contiguous(2, "float32", (2,))), "not aligned to float32"),
        (Compute(0, "frobnicate", (local(0, "int8", (1, 4)),), (local(64, "int8", (1, 4)),), {}),
         "no compute kernel 'frobnicate'"),
    ],
)
def test_illegal_instructions_are_rejected_by_name(instruction, fragment):
    device = Device(BM1684X, 4096)
    with pytest.raises(IllegalProgramError) as error:
        device.execute([instruction])
    assert "instruction 0" in str(error.value) and fragment in str(error.value)


def test_dependencies_must_point_backwards_and_ddr_must_fit_the_chip():
    tensor = local(0, "int8", (1, 4))
    program = [DmaLoad(0, DdrView.contiguous(0, "int8", (4,)), tensor, deps=(1,)),
               DmaStore(1, tensor, DdrView.contiguous(64, "int8", (4,)))]
    with pytest.raises(IllegalProgramError,
                       match="instruction 0 .* depends on instruction 1, which does not come before"):
        schedule(BM1684X, program)
    with pytest.raises(IllegalProgramError, match="needs 2147483648 bytes of DDR; cv183x has 1073741824"):
        Device(CV183X, 2 << 30)
