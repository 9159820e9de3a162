"""The lane layout of tensors in local memory: [N, C, H, W] with C spread over the lanes."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.slicing import Box
from tpu_xdsl.device.isa import DTYPE_SIZES, LocalTensor


def shape4(shape: Sequence[int], constant: bool = False) -> tuple[int, int, int, int]:
    """The [N, C, H, W] lane layout of a tensor of any rank: rank 4 as it is; otherwise the
    first dim is N, the second C (on the lanes) and the rest one row. A constant (a filter
    [OC, IC, kh, kw], a matrix, a table) puts its first dim on the lanes and the rest in
    one row, as the chip keeps weights: each output channel's weights in its lane."""
    dims = [int(d) for d in shape]
    if constant:
        return (1, dims[0], 1, math.prod(dims[1:])) if dims else (1, 1, 1, 1)
    if len(dims) == 4:
        return dims[0], dims[1], dims[2], dims[3]
    if len(dims) == 0:
        return 1, 1, 1, 1
    if len(dims) == 1:
        return 1, dims[0], 1, 1
    if len(dims) == 2:
        return 1, dims[0], 1, dims[1]
    return dims[0], dims[1], 1, math.prod(dims[2:])


def local_tensor(addr: int, dtype: str, box: Box, constant: bool = False, eu_align: bool = True) -> LocalTensor:
    """The local tensor holding `box` at lane address `addr`, in the lane layout (`shape4`);
    its planes packed without execution-unit padding unless `eu_align`."""
    dims = slicing.sizes(box)
    return LocalTensor(addr, dtype, shape4(dims, constant), dims, eu_align)


def lane_bytes(dtype: str, box: Box, constant: bool, npu_num: int, eu_bytes: int, eu_align: bool = True) -> int:
    """Bytes per lane of `local_tensor(..., dtype, box, constant, eu_align)`, without
    building it: cost models ask this thousands of times."""
    n, c, h, w = shape4(slicing.sizes(box), constant)
    plane = h * w * DTYPE_SIZES[dtype]
    if eu_align:
        plane = -(-plane // eu_bytes) * eu_bytes
    return n * -(-c // npu_num) * plane
