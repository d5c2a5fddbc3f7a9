"""GPU device profiles from public measurements and datasheets (no Qt, numpy at predict time).

Importing this package registers its kernel model types in
:data:`predictors.profiles.KERNEL_MODEL_TYPES`, so :func:`predictors.profiles.load_profile`
can read the bundled profiles in ``resources/profiles/gpu``.
"""
from . import embedding_model, gemm_model, roofline_model, tensor_core_gemm  # noqa: F401
from .build import BUNDLED_GPUS, PROFILE_DIR, find_gpu_spec, profile_for_device
from .embedding_model import EmbeddingLookupModel, embedding_bag_ms, l2_hit_model
from .gemm_model import GemmKernelModel
from .roofline_model import MeasuredRooflineModel

__all__ = ["BUNDLED_GPUS", "PROFILE_DIR", "find_gpu_spec", "profile_for_device",
           "EmbeddingLookupModel", "embedding_bag_ms", "l2_hit_model", "GemmKernelModel",
           "MeasuredRooflineModel"]
