"""Pass pipelines the tools run (canonicalization of TOP after import)."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tpu_xdsl.transforms import get_all_passes

# Constants and reshapes first (they expose the patterns), BatchNorm before ReLU
# fusion (conv -> bn -> relu becomes one conv), the pattern fusions before ReLU
# fusion (it would take the Clip out of x * relu6(x + 3) / 6), affine folding after the
# pattern fusions (a LayerNorm's "+ beta" would fold into the matmul after it) and before
# ReLU fusion (conv -> add bias -> relu becomes one conv), DCE last.
CANONICALIZE = (
    "top-constant-fold",
    "top-fold-reshape",
    "top-fold-compare-cast",
    "top-fold-reduce-mean",
    "top-fold-batchnorm",
    "top-fuse-layernorm",
    "top-fuse-gelu",
    "top-fuse-hardswish",
    "top-fuse-silu",
    "top-fuse-softmax",
    "top-fold-affine",
    "top-fuse-relu",
    "top-dce",
)


def canonicalize_passes() -> list[ModulePass]:
    """TOP -> TOP simplifications, in order."""
    passes = get_all_passes()
    return [passes[name]()() for name in CANONICALIZE]


def canonicalize(module: ModuleOp) -> None:
    ctx = Context()
    for p in canonicalize_passes():
        p.apply(ctx, module)
