"""Import rule for Einsum, written with existing TOP ops (permute, reshape, reduce, matmul).

Each pair of operands becomes one batched `top.matmul`: the operand's labels are sorted
into batch (in both operands and kept), rows or columns (in one operand and kept) and
contracted (in both, not kept), each operand is permuted to [batch, rows, contracted] or
[batch, contracted, columns] and flattened to rank 3, and the product is unflattened and
permuted to the labels asked for. A label that only one operand has and nothing keeps is
summed first (`top.reduce`), and one repeated within an operand reads its diagonal
(`top.slice` with a stride). More than two operands are contracted left to right, each
step keeping the labels that a later operand or the output still needs. So the device runs
Einsum on its matmul and data-movement paths, and INT8 gets the matmul's quantization.
"""

from __future__ import annotations

import math
import string

from xdsl.ir import SSAValue

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.elementwise import is_integral
from tpu_xdsl.frontend.rules.nn import typed_output


def _parse(ctx: NodeContext, ranks: list[int]) -> tuple[list[str], str]:
    """Each operand's labels (one letter per dim, '...' spelled out in fresh letters
    shared by all operands) and the output's labels (implicit: the labels seen once, in
    alphabetical order, after the ellipsis dims, as numpy does)."""
    equation = str(ctx.attr("equation", "")).replace(" ", "")
    if not equation:
        raise ctx.error("the 'equation' attribute is required")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.error(
            f"equation '{equation}' names {len(terms)} operand(s) but the node has {len(ranks)}"
        )
    used = set(equation)
    spare = [c for c in string.ascii_letters if c not in used]
    ellipsis_rank = max(
        (rank - len(term.replace("...", "")) for term, rank in zip(terms, ranks) if "..." in term),
        default=0,
    )
    ellipsis = "".join(spare[:ellipsis_rank])
    labels = []
    for i, (term, rank) in enumerate(zip(terms, ranks)):
        if not all(c.isalpha() for c in term.replace("...", "")):
            raise ctx.error(f"equation '{equation}': operand {i}'s term '{term}' is not letters")
        named = len(term.replace("...", ""))
        # An operand's ellipsis covers its own extra dims, aligned to the right (broadcast).
        spelled = term.replace("...", ellipsis[ellipsis_rank - (rank - named):]) if "..." in term else term
        if len(spelled) != rank:
            raise ctx.error(
                f"equation '{equation}': operand {i} has rank {rank} but term '{term}' "
                f"names {len(spelled)} dims"
            )
        labels.append(spelled)
    if arrow:
        output = rhs.replace("...", ellipsis)
        if not all(c.isalpha() for c in output):
            raise ctx.error(f"equation '{equation}': output term '{rhs}' is not letters")
    else:
        counts = {c: sum(term.count(c) for term in labels) for c in set("".join(labels))}
        output = ellipsis + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ellipsis))
    return labels, output


class _Operand:
    """A value with one label per dim."""

    def __init__(self, value: SSAValue, labels: str, sizes: dict[str, int]):
        self.value, self.labels, self.sizes = value, labels, sizes

    @property
    def shape(self) -> list[int]:
        return [self.sizes[c] for c in self.labels]


def _permute(ctx: NodeContext, x: _Operand, labels: str) -> _Operand:
    if labels == x.labels:
        return x
    order = [x.labels.index(c) for c in labels]
    shape = [x.sizes[c] for c in labels]
    (value,) = ctx.emit("permute", [x.value], {"order": order}, shapes_=[shape])
    return _Operand(value, labels, x.sizes)


def _reshape(ctx: NodeContext, value: SSAValue, shape: list[int]) -> SSAValue:
    if list(value.type.get_shape()) == shape:  # type: ignore[attr-defined]
        return value
    (value,) = ctx.emit("reshape", [value], {"shape": shape}, shapes_=[shape])
    return value


def _sum_out(ctx: NodeContext, x: _Operand, keep: set[str]) -> _Operand:
    """Sum the dims whose label nothing later needs."""
    gone = [i for i, c in enumerate(x.labels) if c not in keep]
    if not gone:
        return x
    labels = "".join(c for c in x.labels if c in keep)
    shape = [x.sizes[c] for c in labels]
    attrs = {"mode": "sum", "axes": gone, "keepdims": False}
    (value,) = ctx.emit("reduce", [x.value], attrs, shapes_=[shape])
    return _Operand(value, labels, x.sizes)


def _contract(ctx: NodeContext, a: _Operand, b: _Operand, keep: set[str]) -> _Operand:
    """a and b as one batched matmul, keeping the labels in `keep`."""
    a = _sum_out(ctx, a, keep | set(b.labels))
    b = _sum_out(ctx, b, keep | set(a.labels))
    batch = "".join(c for c in a.labels if c in b.labels and c in keep)
    summed = "".join(c for c in a.labels if c in b.labels and c not in keep)
    rows = "".join(c for c in a.labels if c not in b.labels)
    cols = "".join(c for c in b.labels if c not in a.labels)
    a = _permute(ctx, a, batch + rows + summed)
    b = _permute(ctx, b, batch + summed + cols)
    size = a.sizes
    nb, nr, ns, nc = (math.prod(size[c] for c in part) for part in (batch, rows, summed, cols))
    left = _reshape(ctx, a.value, [nb, nr, ns])
    right = _reshape(ctx, b.value, [nb, ns, nc])
    none = ctx.importer.none_value()
    (product,) = ctx.emit("matmul", [left, right, none], shapes_=[[nb, nr, nc]])
    labels = batch + rows + cols
    return _Operand(_reshape(ctx, product, [size[c] for c in labels]), labels, size)


def _diagonal(ctx: NodeContext, x: _Operand) -> _Operand:
    """x with each label repeated in it ('ii') taken once, along the diagonal: the repeated
    dims moved last and flattened, then every (n^k - 1) / (n - 1)-th element of them."""
    labels = x.labels
    for c in dict.fromkeys(labels):
        count = labels.count(c)
        if count == 1:
            continue
        rest = "".join(d for d in labels if d != c)
        order = [i for i, d in enumerate(labels) if d != c] + [i for i, d in enumerate(labels) if d == c]
        n = x.sizes[c]
        shape = [x.sizes[d] for d in rest]
        (moved,) = ctx.emit("permute", [x.value], {"order": order}, shapes_=[[*shape, *[n] * count]])
        flat = _reshape(ctx, moved, [*shape, n**count])
        step = sum(n**k for k in range(count))  # from (i, i, ..., i) to (i+1, ..., i+1)
        attrs = {"starts": [0], "ends": [n**count], "axes": [len(shape)], "steps": [step]}
        (value,) = ctx.emit("slice", [flat], attrs, shapes_=[[*shape, n]])
        labels = rest + c
        x = _Operand(value, labels, x.sizes)
    return x


@onnx_rule("Einsum")
def einsum(ctx: NodeContext) -> None:
    """Einsum over float tensors (see the module docstring); a label repeated within one
    operand ('ii->i') reads its diagonal. Dims that broadcast (size 1 against n) are
    refused."""
    ranks = [ctx.rank(i) for i in range(ctx.num_inputs)]
    labels, output = _parse(ctx, ranks)
    sizes: dict[str, int] = {}
    for i, term in enumerate(labels):
        if is_integral(ctx.dtype(i)):
            raise ctx.error(f"input {i} is {ctx.dtype(i)}: only float Einsum is supported")
        for c, d in zip(term, ctx.shape(i)):
            if sizes.setdefault(c, d) != d:
                raise ctx.error(
                    f"label '{c}' is {sizes[c]} in one operand and {d} in operand {i}: "
                    "broadcasting Einsum dims is not supported"
                )
    missing = [c for c in output if c not in sizes]
    if missing or len(set(output)) != len(output):
        raise ctx.error(f"output labels '{output}' must be distinct labels of the operands")
    operands = [_diagonal(ctx, _Operand(ctx.input(i), term, sizes)) for i, term in enumerate(labels)]
    labels = [x.labels for x in operands]
    result = _sum_out(ctx, operands[0], set(output) | set("".join(labels[1:])))
    for i in range(1, len(operands)):
        keep = set(output) | set("".join(labels[i + 1:]))
        result = _contract(ctx, result, operands[i], keep)
    result = _permute(ctx, result, output)
    # The last value becomes the node's output under its ONNX name, in its ONNX dtype
    # (TOP computes float16 and bfloat16 in f32).
    shape = result.shape
    typed_output(ctx, "reshape", [result.value], {"shape": shape}, dtype=ctx.dtype(0), shape=shape)
