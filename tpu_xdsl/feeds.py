"""Inputs a user gives, matched to a model's inputs (shared by the interpreter and the
device runtime; no xDSL here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tpu_xdsl.errors import TpuXdslError


def in_input_order(
    names: Sequence[str], inputs: Mapping[str, np.ndarray], error: type[TpuXdslError]
) -> list[np.ndarray]:
    """The given arrays in the order of the model's input `names`: by name, or for a model
    of one input, the single array whatever its key. A missing name raises `error`."""
    if len(inputs) == 1 and len(names) == 1 and names[0] not in inputs:
        return list(inputs.values())
    missing = [n for n in names if n not in inputs]
    if missing:
        raise error(
            f"missing input(s) {', '.join(missing)}; the model's inputs are {', '.join(names)} "
            f"(given: {', '.join(inputs) or 'none'})"
        )
    return [inputs[n] for n in names]
