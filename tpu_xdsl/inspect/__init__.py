"""The inspection tools: a model's stages (ONNX, TOP, TPU, .tpumodel) loaded and run on one
input, stepped side by side (`debug`) or drawn on one HTML page (`report`).

- `stages`: a stage loaded from its file and run by its engine, tensors paired by name;
- `debug/`: the debugger's cursors (a stage stepped op by op or instruction by
  instruction), its session and its commands;
- `report/`: the report's page model, graph SVG, tables, engine timeline and assets;
- `layer_graph`: a model's layers as a graph; `layered_layout`: where to draw them.

The `tpu-xdsl debug` and `tpu-xdsl report` commands (`tpu_xdsl/tools/`) are argparse shims
over this package; nothing here imports the CLI.
"""
