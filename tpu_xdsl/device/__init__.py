"""The Python TPU: chip configs, ISA, simulator, model file, runtime (no xDSL imports)."""
