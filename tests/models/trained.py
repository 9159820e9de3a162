"""Small networks trained inside the test run on scikit-learn's handwritten digits (the
8x8 images ship with scikit-learn) with torch on the CPU, then exported to ONNX as a user
would: a CNN, a CRNN (convolutions, then a bidirectional LSTM over the columns of four
digits side by side) and a transformer encoder over the image rows.

Training is seeded and takes a few seconds each; the networks reach 90 %+ on held-out
digits, so their outputs carry real structure for the compiler to keep.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch
from torch import nn

BATCH = 64  # exported batch: one device run classifies BATCH held-out samples


@cache
def digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train images, train labels, test images, test labels); images N x 1 x 8 x 8 in [0, 1]."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)[:, None]
    labels = data.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    images, labels = images[order], labels[order]
    return images[:1400], labels[:1400], images[1400:], labels[1400:]


class DigitCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
        )
        self.head = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        y = self.features(x)
        return self.head(y.contiguous().view(y.size(0), -1))  # exported as Shape, Gather, Reshape


class DigitCrnn(nn.Module):
    """Four digits side by side (8 x 32): conv features per column, a bidirectional LSTM
    along the 32 columns, one class per 8-column segment (N x 4 x 10)."""

    def __init__(self, hidden: int = 24):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.rnn = nn.LSTM(8 * 8, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, 10)

    def forward(self, x):
        y = self.conv(x)  # N x 8 x 8 x 32
        n, c, h, w = y.shape
        seq = y.permute(0, 3, 1, 2).reshape(n, w, c * h)
        out, _ = self.rnn(seq)  # N x 32 x 2H
        segments = out.reshape(n, 4, w // 4, out.shape[-1]).mean(dim=2)
        return self.head(segments)


class DigitTransformer(nn.Module):
    """The 8 rows of a digit as tokens: embedding, learned positions, two encoder layers
    (multi-head attention, GELU feed-forward, LayerNorm), mean over tokens, a classifier."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.embed = nn.Linear(8, width)
        self.position = nn.Parameter(torch.randn(1, 8, width) * 0.1)
        layer = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        tokens = self.embed(x.reshape(x.shape[0], 8, 8)) + self.position
        return self.head(self.encoder(tokens).mean(dim=1))


def side_by_side(images: np.ndarray, labels: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Groups of four digits placed side by side: N/4 x 1 x 8 x 32 images, N/4 x 4 labels."""
    order = np.random.default_rng(seed).permutation(len(labels))
    count = len(labels) // 4 * 4
    picked, tags = images[order[:count]], labels[order[:count]]
    wide = picked.reshape(-1, 4, 1, 8, 8).transpose(0, 2, 3, 1, 4).reshape(-1, 1, 8, 32)
    return np.ascontiguousarray(wide), tags.reshape(-1, 4)


@dataclass
class Trained:
    name: str
    module: nn.Module
    sample_shape: tuple[int, ...]  # one input without the batch
    test_x: np.ndarray
    test_y: np.ndarray  # labels: N, or N x 4 for the CRNN
    train_x: np.ndarray

    def export(self, path, opset: int, batch: int = BATCH, exporter: str = "torchscript") -> None:
        """torch.onnx.export at `opset` with the TorchScript exporter (opsets 9-20) or with
        the dynamo one (torch.export and onnxscript, opsets 18+; torch's default since 2.9)."""
        example = torch.from_numpy(self.test_x[:batch])
        if exporter == "dynamo":
            program = torch.onnx.export(self.module, (example,), dynamo=True, opset_version=opset,
                                        input_names=["image"], output_names=["logits"])
            assert program is not None
            program.save(str(path))
            return
        buffer = io.BytesIO()
        torch.onnx.export(self.module, (example,), buffer, opset_version=opset, dynamo=False,
                          input_names=["image"], output_names=["logits"])
        path.write_bytes(buffer.getvalue())

    def accuracy(self, logits: np.ndarray, labels: np.ndarray) -> float:
        return float(np.mean(np.argmax(logits, axis=-1) == labels))


def _train(module: nn.Module, x: np.ndarray, y: np.ndarray, epochs: int, lr: float = 3e-3) -> nn.Module:
    torch.manual_seed(0)
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    generator = torch.Generator().manual_seed(0)
    module.train()
    for _ in range(epochs):
        for batch in torch.randperm(len(xs), generator=generator).split(64):
            optimizer.zero_grad()
            logits = module(xs[batch])
            loss = nn.functional.cross_entropy(logits.reshape(-1, 10), ys[batch].reshape(-1))
            loss.backward()
            optimizer.step()
    return module.eval()


@cache
def trained(name: str) -> Trained:
    torch.manual_seed(0)
    train_x, train_y, test_x, test_y = digits()
    if name == "cnn":
        return Trained(name, _train(DigitCnn(), train_x, train_y, epochs=4), (1, 8, 8), test_x, test_y, train_x)
    if name == "transformer":
        return Trained(name, _train(DigitTransformer(), train_x, train_y, epochs=6), (1, 8, 8), test_x, test_y,
                       train_x)
    if name == "crnn":
        wide_x, wide_y = side_by_side(train_x, train_y, seed=1)
        held_x, held_y = side_by_side(test_x, test_y, seed=3)
        return Trained(name, _train(DigitCrnn(), wide_x, wide_y, epochs=15, lr=1e-2), (1, 8, 32), held_x, held_y,
                       wide_x)
    raise KeyError(name)
