"""Calibration: per-tensor int8 thresholds of a TOP module over a dataset (`tpu-xdsl calibrate`).

- `dataset`: the sample files, read one at a time;
- `statistics`: interpreter listeners collecting min/max, then histograms of |x|;
- `thresholds`: KL (TensorRT's entropy calibration), MSE, max, percentile 99.99;
- `tune`: optional auto-tune of the thresholds that matter most for the outputs;
- `table`: TPU-MLIR's calibration table format, written and read;
- `calibrator`: one run of the above, in one or more processes.
"""
