"""LSTM and GRU kernels."""

from __future__ import annotations
