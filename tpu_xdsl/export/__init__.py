"""Modules leaving the project's dialects: TOSA for upstream MLIR, compiled and run by IREE."""
