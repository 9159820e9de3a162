"""Chip configurations of the modelled TPUs (public figures, DESIGN.md section 6).

Adding a chip is adding one `ChipConfig`. This module knows nothing of xDSL.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpu_xdsl.errors import TpuXdslError


class UnknownChipError(TpuXdslError):
    """A chip name that no configuration describes."""


@dataclass(frozen=True)
class ChipConfig:
    name: str
    npu_num: int  # lanes
    lmem_bytes: int  # local memory per lane
    lmem_banks: int
    eu_bytes: int  # execution-unit width
    modes: tuple[str, ...]  # quantization modes the chip computes in
    clock_hz: float
    # Peak multiply-accumulates per cycle by mode (TOPS = 2 * MAC/cycle * clock).
    macs_per_cycle: dict[str, int]
    ddr_to_lmem_bytes_per_s: float
    lmem_to_ddr_bytes_per_s: float
    ddr_bytes: int
    # How the conv/matmul array reaches its peak, per mode: output channels on the
    # lanes x input channels in parallel x output pixels in parallel = macs_per_cycle.
    ic_parallel: dict[str, int]
    pixel_parallel: dict[str, int]
    # Fixed cycles to issue an instruction on each engine (our choice; see docs/device.md).
    compute_latency: int = 64
    dma_latency: int = 200

    def supports(self, mode: str) -> bool:
        return mode.upper() in self.modes

    @property
    def lmem_bank_bytes(self) -> int:
        return self.lmem_bytes // self.lmem_banks

    def cycles_to_seconds(self, cycles: float) -> float:
        return cycles / self.clock_hz


# bm1684x: public figures. INT8 32 TOPS = 64 lanes x 64 input channels x 4 output
# pixels = 16,384 MAC/cycle at 1 GHz; F16/BF16 half of that; F32 64 lanes x 16
# floats per 64-byte EU = 1,024 MAC/cycle (2 TOPS).
BM1684X = ChipConfig(
    name="bm1684x",
    npu_num=64,
    lmem_bytes=256 * 1024,
    lmem_banks=16,
    eu_bytes=64,
    modes=("F32", "F16", "BF16", "INT8"),
    clock_hz=1e9,
    macs_per_cycle={"INT8": 16384, "F16": 8192, "BF16": 8192, "F32": 1024},
    ddr_to_lmem_bytes_per_s=58e9,
    lmem_to_ddr_bytes_per_s=44e9,
    ddr_bytes=12 * 1024**3,
    ic_parallel={"INT8": 64, "F16": 32, "BF16": 32, "F32": 16},
    pixel_parallel={"INT8": 4, "F16": 4, "BF16": 4, "F32": 1},
)

# cv183x: lanes, local memory, banks, EU width and modes are public; the rest is
# our documented choice: 650 MHz; INT8 32 lanes x 16 input channels x 4 output
# pixels = 2,048 MAC/cycle (~2.7 TOPS); BF16 a quarter of that; 4 GB/s DMA.
CV183X = ChipConfig(
    name="cv183x",
    npu_num=32,
    lmem_bytes=32 * 1024,
    lmem_banks=8,
    eu_bytes=16,
    modes=("BF16", "INT8"),
    clock_hz=650e6,
    macs_per_cycle={"INT8": 2048, "BF16": 512},
    ddr_to_lmem_bytes_per_s=4e9,
    lmem_to_ddr_bytes_per_s=4e9,
    ddr_bytes=1 * 1024**3,
    ic_parallel={"INT8": 16, "BF16": 16},
    pixel_parallel={"INT8": 4, "BF16": 1},
    dma_latency=300,
)

CHIPS = {c.name: c for c in (BM1684X, CV183X)}

for _chip in CHIPS.values():
    for _mode in _chip.modes:
        assert _chip.npu_num * _chip.ic_parallel[_mode] * _chip.pixel_parallel[_mode] == _chip.macs_per_cycle[_mode]


def chip_config(name: str) -> ChipConfig:
    try:
        return CHIPS[name.lower()]
    except KeyError:
        raise UnknownChipError(f"unknown chip '{name}'; known chips: {', '.join(CHIPS)}") from None


def check_mode(chip: ChipConfig, mode: str) -> str:
    """The mode in upper case, or an error naming the chip's modes."""
    mode = mode.upper()
    if mode not in ("F32", "F16", "BF16", "INT8"):
        raise TpuXdslError(f"--quantize {mode}: choose F32, F16, BF16 or INT8")
    if not chip.supports(mode):
        raise TpuXdslError(
            f"chip {chip.name} has no {mode} mode; it computes in {', '.join(chip.modes)}"
        )
    return mode
