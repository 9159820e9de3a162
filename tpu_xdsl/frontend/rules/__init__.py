"""ONNX import rules by op family; each module registers its rules on import."""
