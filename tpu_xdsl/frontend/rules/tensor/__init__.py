"""Import rules for shape and data-movement ops, casts and indexing.

TOP's data-movement ops (reshape, permute, concat, slice, gather, pad, ...)
take any element type: integer and bool tensors keep their dtype, exactly,
and float tensors are f32 as everywhere in TOP (`common.data_value`, `common.moved`). The f32-only
top.interp casts an integer input and casts the result back.
Shape-like inputs (Reshape's shape, Slice's starts, Pad's pads, Resize's
scales, ...) must be constants: the importer folds shape subgraphs, so a
run-time one is a model this compiler cannot give static shapes.
Every rule normalizes attributes to TOP's form: non-negative axes, explicit
lists, clamped slice bounds, and passes the result shape explicitly.
"""

from tpu_xdsl.frontend.rules.tensor import (  # noqa: F401  (each module registers its rules)
    casts,
    indexing,
    join_split,
    reshape,
    resize,
    slice_pad,
)
