"""The accuracy benchmark's reading of a recognizer's output as text, and of its mode labels."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest


def _accuracy():
    path = Path(__file__).parent.parent / "benchmarks" / "accuracy.py"
    spec = importlib.util.spec_from_file_location("accuracy_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_greedy_ctc_decoding_by_hand():
    ctc_text = _accuracy().ctc_text
    # best classes per position: blank, 7, 7, blank, 7, 3, 3, blank -> "7 7 3" (a blank
    # separates the two 7s; repeats merge)
    best = [0, 7, 7, 0, 7, 3, 3, 0]
    probabilities = np.full((1, len(best), 9), 0.01, np.float32)
    probabilities[0, np.arange(len(best)), best] = 0.9
    assert ctc_text(probabilities) == [7, 7, 3]
    # a peak that moves by one position reads the same text
    moved = [7, 7, 0, 0, 7, 3, 0, 0]
    shifted = np.full_like(probabilities, 0.01)
    shifted[0, np.arange(len(moved)), moved] = 0.9
    assert ctc_text(shifted) == ctc_text(probabilities)
    assert ctc_text(np.eye(3, dtype=np.float32)[None]) == [1, 2]


def test_mode_labels_name_their_recovery_steps():
    """A row's label: a mode, then the steps that recover its accuracy; +hardest and +share
    only choose the samples and the limits of a +qtable search."""
    parse = _accuracy().base_and_recovery
    assert parse("INT8 sym +qtable +hardest") == ("INT8 sym", ("qtable", "hardest"))
    assert parse("BF16 +qtable +hardest") == ("BF16", ("qtable", "hardest"))
    assert parse("INT8 sym per-tensor +we +bc") == ("INT8 sym per-tensor", ("we", "bc"))
    assert parse("INT8 sym +qtable +hardest +share") == ("INT8 sym", ("qtable", "hardest", "share"))
    for label in ("INT8 sym +hardest", "BF16 +we", "INT8 sym +sharpen", "INT4 +qtable", "INT8 sym +share"):
        with pytest.raises(SystemExit, match="unknown mode"):
            parse(label)
