"""The project's passes, one per file; each file is named after its pass (the TOSA export's
passes live in tpu_xdsl/export/)."""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name -> factory returning the pass class (imported lazily)."""

    def convert_top_to_tosa():
        from tpu_xdsl.export.convert_top_to_tosa import ConvertTopToTosa

        return ConvertTopToTosa

    def convert_tpu_to_tosa():
        from tpu_xdsl.export.convert_tpu_to_tosa import ConvertTpuToTosa

        return ConvertTpuToTosa

    def import_calibration():
        from tpu_xdsl.transforms.import_calibration import ImportCalibrationPass

        return ImportCalibrationPass

    def lower_top_to_tpu():
        from tpu_xdsl.transforms.lower_top_to_tpu import LowerTopToTpuPass

        return LowerTopToTpuPass

    def top_constant_fold():
        from tpu_xdsl.transforms.top_constant_fold import TopConstantFold

        return TopConstantFold

    def top_dce():
        from tpu_xdsl.transforms.top_dce import TopDce

        return TopDce

    def top_fold_affine():
        from tpu_xdsl.transforms.top_fold_affine import TopFoldAffine

        return TopFoldAffine

    def top_fold_batchnorm():
        from tpu_xdsl.transforms.top_fold_batchnorm import TopFoldBatchnorm

        return TopFoldBatchnorm

    def top_fold_compare_cast():
        from tpu_xdsl.transforms.top_fold_compare_cast import TopFoldCompareCast

        return TopFoldCompareCast

    def top_fold_reduce_mean():
        from tpu_xdsl.transforms.top_fold_reduce_mean import TopFoldReduceMean

        return TopFoldReduceMean

    def top_fold_reshape():
        from tpu_xdsl.transforms.top_fold_reshape import TopFoldReshape

        return TopFoldReshape

    def top_fuse_gelu():
        from tpu_xdsl.transforms.top_fuse_gelu import TopFuseGelu

        return TopFuseGelu

    def top_fuse_hardswish():
        from tpu_xdsl.transforms.top_fuse_hardswish import TopFuseHardswish

        return TopFuseHardswish

    def top_fuse_layernorm():
        from tpu_xdsl.transforms.top_fuse_layernorm import TopFuseLayernorm

        return TopFuseLayernorm

    def top_fuse_relu():
        from tpu_xdsl.transforms.top_fuse_relu import TopFuseRelu

        return TopFuseRelu

    def top_fuse_silu():
        from tpu_xdsl.transforms.top_fuse_silu import TopFuseSilu

        return TopFuseSilu

    def top_fuse_softmax():
        from tpu_xdsl.transforms.top_fuse_softmax import TopFuseSoftmax

        return TopFuseSoftmax

    def tpu_assign_memory():
        from tpu_xdsl.transforms.tpu_assign_memory import TpuAssignMemory

        return TpuAssignMemory

    def tpu_layer_group():
        from tpu_xdsl.transforms.tpu_layer_group import TpuLayerGroup

        return TpuLayerGroup

    return {
        "convert-top-to-tosa": convert_top_to_tosa,
        "convert-tpu-to-tosa": convert_tpu_to_tosa,
        "import-calibration": import_calibration,
        "lower-top-to-tpu": lower_top_to_tpu,
        "top-constant-fold": top_constant_fold,
        "top-dce": top_dce,
        "top-fold-affine": top_fold_affine,
        "top-fold-batchnorm": top_fold_batchnorm,
        "top-fold-compare-cast": top_fold_compare_cast,
        "top-fold-reduce-mean": top_fold_reduce_mean,
        "top-fold-reshape": top_fold_reshape,
        "top-fuse-gelu": top_fuse_gelu,
        "top-fuse-hardswish": top_fuse_hardswish,
        "top-fuse-layernorm": top_fuse_layernorm,
        "top-fuse-relu": top_fuse_relu,
        "top-fuse-silu": top_fuse_silu,
        "top-fuse-softmax": top_fuse_softmax,
        "tpu-assign-memory": tpu_assign_memory,
        "tpu-layer-group": tpu_layer_group,
    }
