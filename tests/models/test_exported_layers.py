"""Small torch networks built from layers the other corpora lack, exported by torch's
TorchScript exporter at opsets 11, 13 and 17 and by its dynamo exporter at 18, through the
whole flow a user runs: transform (against onnxruntime), calibrate, deploy INT8 and BF16
(each checked against the TOP module by deploy) and the INT8 program on the device,
compared with onnxruntime on every output.

- unet: GroupNorm, InstanceNorm, PReLU, SiLU, a stride-2 ConvTranspose, a skip concat.
- shuffle: PixelShuffle, leaky ReLU, a bilinear downsample, a dilated conv, a slice and a
  non-global adaptive average pool (8 -> 4; the TorchScript exporter refuses sizes that do
  not divide).
- detect: a YOLO-style head: depthwise conv, ReLU6, Hardswish, view / permute / reshape,
  sigmoid and exp box decoding, a clamp, and a second output (max pool, max over channels).

The weights are torch's random initialisation: the flow computes the same function whatever
the weights, and onnxruntime gives the expected values."""

from __future__ import annotations

import io

import numpy as np
import onnxruntime as ort
import pytest

from tests.test_cli_transform import tpu_xdsl
from tpu_xdsl.interp.compare import compare_tensors

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.SiLU())
        self.down2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.InstanceNorm2d(16, affine=True),
                                   nn.PReLU())
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.out = nn.Conv2d(16, 2, 1)

    def forward(self, x):
        a = self.down1(x)
        return torch.sigmoid(self.out(torch.cat([a, self.up(self.down2(a))], 1)))


class Shuffle(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 12, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.dilated = nn.Conv2d(3, 4, 3, padding=2, dilation=2)

    def forward(self, x):
        y = self.shuffle(F.leaky_relu(self.conv(x), 0.1))
        y = F.interpolate(y, scale_factor=0.5, mode="bilinear", align_corners=False)
        return F.adaptive_avg_pool2d(self.dilated(y)[:, :, 4:12, 3:11], (4, 4)).flatten(1)


class Detect(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU6(), nn.Conv2d(8, 8, 3, 1, 1, groups=8), nn.BatchNorm2d(8),
            nn.Hardswish(), nn.Conv2d(8, 16, 1),
        )
        self.head = nn.Conv2d(16, 6, 1)

    def forward(self, x):
        features = self.body(x)
        p = self.head(features)
        n, _, h, w = p.shape
        p = p.view(n, 2, 3, h, w).permute(0, 1, 3, 4, 2).reshape(n, -1, 3)
        boxes = torch.cat([p[..., :2].sigmoid() * 2 - 0.5, p[..., 2:].exp().clamp(max=10.0)], -1)
        return boxes, F.max_pool2d(features, 3, 1, 1).amax(1)


NETS = {"unet": (UNet, (1, 3, 32, 32)), "shuffle": (Shuffle, (1, 3, 16, 16)), "detect": (Detect, (1, 3, 32, 32))}
SLOW = pytest.mark.slow
EXPORTS = [
    ("unet", 13, "torchscript"), ("detect", 18, "dynamo"), ("shuffle", 11, "torchscript"),
    *(pytest.param(net, opset, exporter, marks=SLOW)
      for net in NETS for opset, exporter in ((11, "torchscript"), (13, "torchscript"), (17, "torchscript"),
                                              (18, "dynamo"))
      if (net, opset, exporter) not in {("unet", 13, "torchscript"), ("detect", 18, "dynamo"),
                                        ("shuffle", 11, "torchscript")}),
]


def _export(net: nn.Module, x, path, opset: int, exporter: str) -> None:
    if exporter == "dynamo":
        program = torch.onnx.export(net, (x,), dynamo=True, opset_version=opset, input_names=["x"])
        assert program is not None
        program.save(str(path))
        return
    buffer = io.BytesIO()
    torch.onnx.export(net, (x,), buffer, opset_version=opset, dynamo=False, input_names=["x"])
    path.write_bytes(buffer.getvalue())


def _ok(r) -> None:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr


@pytest.mark.parametrize(("name", "opset", "exporter"), EXPORTS)
def test_exported_layers_through_the_flow(name, opset, exporter, tmp_path):
    torch.manual_seed(0)
    cls, shape = NETS[name]
    net = cls().eval()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    onnx_path = tmp_path / "m.onnx"
    _export(net, torch.from_numpy(x), onnx_path, opset, exporter)
    np.savez(tmp_path / "x.npz", x=x)
    data = tmp_path / "calibration"
    data.mkdir()
    for i in range(8):
        np.savez(data / f"s{i}.npz", x=rng.standard_normal(shape).astype(np.float32))

    _ok(tpu_xdsl("transform", "--model-def", str(onnx_path), "--model-name", name, "--test-input",
                 str(tmp_path / "x.npz"), "--test-result", str(tmp_path / "top.npz"), "-o", str(tmp_path / "m.mlir")))
    _ok(tpu_xdsl("calibrate", str(tmp_path / "m.mlir"), "--dataset", str(data), "-o", str(tmp_path / "table")))
    checked = ("--test-input", str(tmp_path / "x.npz"), "--test-reference", str(tmp_path / "top.npz"))
    _ok(tpu_xdsl("deploy", str(tmp_path / "m.mlir"), "--quantize", "BF16", *checked,
                 "-o", str(tmp_path / "m_bf16.tpumodel")))
    _ok(tpu_xdsl("deploy", str(tmp_path / "m.mlir"), "--quantize", "INT8", "--calibration-table",
                 str(tmp_path / "table"), *checked, "-o", str(tmp_path / "m_int8.tpumodel")))

    _ok(tpu_xdsl("run", str(tmp_path / "m_int8.tpumodel"), "--input", str(tmp_path / "x.npz"),
                 "--output", str(tmp_path / "out.npz")))
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    expected = dict(zip((o.name for o in session.get_outputs()), session.run(None, {"x": x}), strict=True))
    with np.load(tmp_path / "out.npz") as out:
        assert sorted(out.files) == sorted(expected), "the device's outputs keep their ONNX names"
        for key, value in expected.items():
            assert compare_tensors(key, value, out[key]).cosine >= 0.99, key
