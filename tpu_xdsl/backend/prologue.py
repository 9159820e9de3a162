"""Casts that run inside the slices of the op reading them.

In INT8 an op without an INT8 form (a softmax, an elementwise function) reads its input
through a `tpu.cast` to float. Run op by op, the cast writes the float tensor to DDR and
the op reads it back: 2.3 MB of PP-OCR's recognizer's 11.1 MB of traffic. When the
cast is the op's only input and the next op, codegen runs the cast in each slice of the
op instead (`codegen/slices.py`), and tpu-assign-memory keeps the cast's input live until
the op is done, since the op's slices read it while writing their results
(`transforms/tpu_assign_memory.py`). Both ask `prologue_casts`.

No xDSL rewriting here: the IR keeps the cast.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from xdsl.ir import Operation

from tpu_xdsl.backend.op_shapes import value_shape
from tpu_xdsl.kernels import op_kinds

# Ops whose one operand may come from a cast run in their own slices.
_WITH_PROLOGUE = op_kinds.UNARY | {"softmax", "log_softmax"}


def prologue_casts(ops: Sequence[Operation]) -> dict[Operation, Operation]:
    """The casts that run inside the slices of the one op that reads them: a `tpu.cast`
    whose only use is the only operand of the next op, an elementwise function or a
    softmax of the same shape (the dequantization before an op that has no INT8 form).
    Its result then never goes to DDR and back. Consumer -> its cast."""
    found = {}
    ops = [op for op in ops if op.name not in ("top.weight", "top.none")]
    for op, after in itertools.pairwise(ops):
        uses = list(op.results[0].uses) if len(op.results) == 1 else []
        if op.name != "tpu.cast" or len(uses) != 1:
            continue
        user = uses[0].operation
        # The next op, so that the cast's input lives one op longer than it did.
        if (user is after and user.name.startswith("tpu.") and user.name.removeprefix("tpu.") in _WITH_PROLOGUE
                and len(user.operands) == 1 and len(user.results) == 1
                and user.parent_block() is op.parent_block()
                and value_shape(user.results[0]) == value_shape(op.results[0])):
            found[user] = op
    return found


