"""Import rules for pre-quantized ONNX: QDQ, QOperator and dynamic quantization.

TOP holds real values, so a quantized tensor of the model is imported as the
float tensor its codes stand for, and the model's scale and zero point of it
become its calibration (`tpu_xdsl.calibration.model_scales`): INT8 lowering
then uses exactly the model's scales, and `deploy --quantize INT8` needs no
calibration table.

- QDQ (onnxruntime's `quantize_static` with QuantFormat.QDQ, QAT exporters):
  a QuantizeLinear of an activation records its scale on the float tensor and
  passes it on; a DequantizeLinear of such a tensor passes it on too. A
  DequantizeLinear of a constant (weights, int32 biases) is folded by the
  importer to the exact float32 values ONNX computes, (q - zero_point) * scale.
- QOperator (QLinearConv, QLinearMatMul, QGemm, com.microsoft QLinearAdd,
  QLinearMul, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax,
  QLinearAveragePool, QLinearGlobalAveragePool): the float op on the real
  values of the inputs (constants dequantized) under the derived name
  `{output}_real` (the ONNX name holds codes in onnxruntime), its output scale
  recorded.
- Dynamic quantization (DynamicQuantizeLinear, ConvInteger, MatMulInteger,
  com.microsoft DynamicQuantizeMatMul and DynamicQuantizeLSTM) computes scales
  at run time: the model is imported as a float model. DynamicQuantizeLinear
  passes the float tensor on with scale 1 and zero point 0, so ConvInteger /
  MatMulInteger become the float op on dequantized weights and the following
  Mul by the scales leaves the weight scale; a note says so, and the model is
  calibrated like any float one.

Tensors quantized along an axis, or to 16 bits, keep no calibration: the ops
producing them run in a float mode.
"""

from tpu_xdsl.frontend.rules.quantized import integer, qdq, qoperator  # noqa: F401  (they register rules)
from tpu_xdsl.frontend.rules.quantized.common import passes_codes
from tpu_xdsl.frontend.rules.quantized.model import (
    ModelQuantization,
    attach_model_scales,
    quantization,
)

__all__ = ["ModelQuantization", "attach_model_scales", "passes_codes", "quantization"]
