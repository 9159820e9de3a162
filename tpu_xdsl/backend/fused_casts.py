"""Casts that run inside the slices of the op next to them.

In INT8 an op without an INT8 form (a softmax, an elementwise function) reads its input
through a `tpu.cast` to float, and its float result goes back to INT8 through another
cast when an INT8 op reads it. Run op by op, each cast writes a tensor to DDR that the
next op reads back: the float one, four times the bytes of the INT8 one.

- A prologue: when the cast before the op is the op's only input and the op right
  before it, codegen runs the cast in each slice of the op (`codegen/slices.py`), and
  tpu-assign-memory keeps the cast's input live until the op is done, since the op's
  slices read it while writing their results. 2.3 MB of PP-OCR's recognizer's 11.1 MB
  of traffic.
- An epilogue: when the op's result has one reader, a cast right after it, each slice
  casts the op's result and stores the cast's; the float result never reaches DDR.
  tpu-assign-memory places the cast's result as if the op defined it (the op's slices
  write it while reading the op's input), and tpu-layer-group leaves such a cast out
  of groups (a group would load the float tensor to cast it). nudenet's box-distribution
  softmax wrote 537 KB of float32 that its next group loaded to quantize.

The slices are the op's own, chosen as for the op alone. No xDSL rewriting here: the
IR keeps the casts. Codegen, tpu-assign-memory and tpu-layer-group all ask
`prologue_casts` and `epilogue_casts`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from xdsl.ir import Operation

from tpu_xdsl.backend.op_shapes import value_shape
from tpu_xdsl.kernels import op_kinds

# Ops whose one operand may come from a cast run in their own slices, or whose one
# result may go through a cast there.
_WITH_CASTS = op_kinds.UNARY | {"softmax", "log_softmax"}


def _fusable(op: Operation) -> bool:
    return (op.name.startswith("tpu.") and op.name.removeprefix("tpu.") in _WITH_CASTS
            and len(op.operands) == 1 and len(op.results) == 1)


def _same_shape(a: Operation, b: Operation) -> bool:
    return value_shape(a.results[0]) == value_shape(b.results[0])


def _program(ops: Sequence[Operation]) -> list[Operation]:
    return [op for op in ops if op.name not in ("top.weight", "top.none")]


def prologue_casts(ops: Sequence[Operation]) -> dict[Operation, Operation]:
    """The casts that run inside the slices of the one op that reads them: a `tpu.cast`
    whose only use is the only operand of the next op, an elementwise function or a
    softmax of the same shape (the dequantization before an op that has no INT8 form).
    Its result then never goes to DDR and back. Consumer -> its cast."""
    found = {}
    for op, after in itertools.pairwise(_program(ops)):
        uses = list(op.results[0].uses) if len(op.results) == 1 else []
        if op.name != "tpu.cast" or len(uses) != 1:
            continue
        user = uses[0].operation
        # The next op, so that the cast's input lives one op longer than it did.
        if (user is after and _fusable(user) and user.parent_block() is op.parent_block()
                and _same_shape(user, op)):
            found[user] = op
    return found


def epilogue_casts(ops: Sequence[Operation]) -> dict[Operation, Operation]:
    """The casts that run inside the slices of the op they read: a `tpu.cast` right after
    an elementwise function or a softmax whose result only it reads (the quantization
    after an op that has no INT8 form), of the same shape, with the op's result as its
    first operand, and not a prologue of the op after it. The op's result then never goes
    to DDR. Producer -> its cast."""
    found = {}
    prologues = set(prologue_casts(ops).values())
    for op, after in itertools.pairwise(_program(ops)):
        if after in prologues:
            continue
        uses = list(op.results[0].uses) if _fusable(op) else []
        if len(uses) != 1 or uses[0].operation is not after or uses[0].index != 0:
            continue
        if after.name == "tpu.cast" and after.parent_block() is op.parent_block() and _same_shape(after, op):
            found[op] = after
    return found
