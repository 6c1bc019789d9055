"""Attribute device kernels (names from torch.profiler) to who wrote them.

A correct entry is only native when its device time went to its own Triton kernels (issue 3,
"Dynamic analysis"); cuBLAS, cuDNN, flash-attention, PyTorch's own kernels and torch.compile's
Triton kernels are fallbacks. Names seen on a real H200 are in tests/data/.

Two rules keep a hostile entry from claiming someone else's kernel:
- Library patterns are checked *before* the entry's own names. Kernel names of cuBLAS and
  torch.compile are public and deterministic, so an entry could define a decoy
  ``@triton.jit def nvjet_sm90_tst_...`` or ``def triton_poi_fused_add_0`` and then call
  torch.matmul / torch.compile; the library's kernel must still count as the library's.
  The price: an honest Triton kernel named like a library kernel is not counted as its own.
- An own name matches exactly (or with Triton's old signature suffix), never as a bare
  prefix: an entry with a jit function named ``sm80`` or ``triton`` must not own every
  kernel that starts that way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable
from enum import StrEnum


class KernelKind(StrEnum):
    OWN_TRITON = "own_triton"  # one of the entry's own @triton.jit functions
    OTHER_TRITON = "other_triton"  # torch.compile/inductor, or Triton code not the entry's
    VENDOR = "vendor"  # cuBLAS(Lt), cuDNN, CUTLASS, flash-attention, NCCL, ...
    TORCH_NATIVE = "torch_native"  # PyTorch's own CUDA kernels (at::native, ...)
    COPY = "copy"  # device-to-device Memcpy and Memset activities
    # Memcpy to or from the host: data leaving the device inside a call is work done
    # elsewhere (seen on the H200, 2026-12-02: a sum computed on the host behind 38 ms of
    # device-to-pageable copies), so it counts against the entry's share, never ignored.
    HOST_COPY = "host_copy"
    UNKNOWN = "unknown"


# Demangled C++ kernels start with their return type when they are templates ("void ...");
# Triton kernels never do.
_VOID = r"(?:void\s+)?"

_COPY = re.compile(r"^(?:Memcpy|Memset)\b")
# PyTorch's own copy kernels: what copy_, contiguous() and .to(dtype) launch on the device
# (names on the H200: tests/data, contiguous_transpose_bf16 and to_dtype). The policy allows
# copies (its "copies" group), so these are copies like a Memcpy, neither for nor against the
# share (seen on the H200, 2026-12-02: Liger-Kernel's GEGLU made its strided halves contiguous
# and was a fallback for it).
_TORCH_COPY = re.compile(_VOID + r"at::native::(?:vectorized_|unrolled_)?elementwise_kernel<"
                         r"[^>]*?(?:direct_copy_kernel_cuda|\w+_copy_kernel_cuda|copy_kernel_impl)")
# PyTorch's fill kernels: what zeros(), full(), fill_() and zero_() launch on the device. The
# policy allows fills (its "fills" group) and says their time counts neither for nor against
# the share, as a Memset's; on a tiny shape a per-call zero-fill takes as long as the kernel
# (a held-out look-alike on the H200, 2026-12-05: an honest matmul that zero-filled a one-value
# buffer per call was a fallback on its 64x48x80 shape). A fill writes a constant: no work of
# the problem can hide in it.
_TORCH_FILL = re.compile(_VOID + r"at::native::(?:vectorized_|unrolled_)?elementwise_kernel<"
                         r"[^>]*?FillFunctor<")
_HOST_COPY = re.compile(r"^Memcpy (?:HtoD|DtoH|HtoH)\b|^Memcpy .*(?:Pageable|Pinned|Host)")

# Inductor names its kernels triton_<category[:3]>_<fused ops>_<n> (poi, red, per, tem, for,
# spl, unk), or plain "triton_" when unique_kernel_names is off.
_INDUCTOR = re.compile(r"^triton_(?:(?:poi|red|per|tem|for|spl|unk|com)_|$)")

_VENDOR = re.compile(
    _VOID + r"(?:"
    r"nvjet_"  # cuBLAS(Lt) on Hopper and later: nvjet_sm90_tst_..., _hsh_, _qqtst_
    r"|[A-Za-z0-9_]*xmma"  # cuBLAS/cuDNN: sm80_xmma_gemm_*, sm90_xmma_*, *_xmma_fprop_*
    r"|(?:maxwell|volta|turing|ampere|hopper|blackwell)_\w*(?:gemm|conv|fprop|dgrad|wgrad)"
    r"|cutlass"  # cutlass::Kernel2<...>, cutlass_80_*, cutlass3x_*, FA3's cutlass::device_kernel
    r"|cublas"  # cublasLt::splitKreduce_kernel, cublas internals
    r"|cudnn"  # cudnn_generated_fort_native_sdpa_*, cudnn::engines_precompiled::*
    r"|pytorch_flash::|flash::"  # flash-attention, PyTorch's vendored copy and Dao's own
    r"|fmha_cutlass|PyTorchMemEffAttention::"  # memory-efficient attention (xformers)
    r"|nccl"  # ncclKernel_*, ncclDevKernel_*
    r"|cusparse|cufft|curand|cusolver"
    r"|flashinfer::|transformer_engine::|vllm::|fbgemm_gpu::"
    # Older cuBLAS/cuDNN/cuFFT kernels with generic names: only the templated or
    # parameterised form, which a Triton kernel's name can never have.
    r"|(?:gemv2[NT]_kernel_val|gemvNSP_kernel|gemmk1_kernel|gemmSN_\w+kernel"
    r"|splitKreduce_kernel|dot_kernel|reduce_1Block_kernel"
    r"|(?:implicit|explicit|precomputed)_convolve_[sdh]gemm"
    r"|(?:regular|vector|composite_2way)_fft)[<(]"
    r")"
)

# PyTorch's own kernels. cub/thrust come from the CUDA toolkit but reach PyTorch programs
# through aten ops (sort, unique, nonzero); torch vendors them as at_cuda_detail::cub.
_TORCH_NATIVE = re.compile(
    _VOID + r"(?:at::|at_cuda_detail::|c10::|torch::|caffe2::|\(anonymous namespace\)::"
    r"|cub::|thrust::)"
)

# Triton <= 2.1 named compiled kernels <fn>_<signature>, e.g. add_kernel_0d1d2d3de
# (d: divisible by 16, c: constant, e: equal to 1). Triton 3 uses the bare function name.
_LEGACY_SUFFIX = re.compile(r"^_\d[\dcde]*$")


def _is_own(name: str, own_kernels: Collection[str]) -> bool:
    if name in own_kernels:
        return True
    for own in own_kernels:
        if own and name.startswith(own) and _LEGACY_SUFFIX.match(name[len(own) :]):
            return True
    return False


def classify(
    name: str, own_kernels: Collection[str], *, triton_launches: Collection[str] = ()
) -> KernelKind:
    """Who wrote the device kernel ``name``.

    ``own_kernels``: the entry's @triton.jit function names (from its source, host side).
    ``triton_launches``: optional names that Triton's launch hook saw in the entry's
    container; a name there that is neither the entry's nor a known library's is another
    Triton kernel rather than unknown. It never makes a kernel the entry's own, since
    that record comes from the untrusted side.
    """
    name = name.strip()
    if _HOST_COPY.match(name):
        return KernelKind.HOST_COPY
    if _COPY.match(name) or _TORCH_COPY.match(name) or _TORCH_FILL.match(name):
        return KernelKind.COPY
    if _INDUCTOR.match(name):
        return KernelKind.OTHER_TRITON
    if _VENDOR.match(name):
        return KernelKind.VENDOR
    if _TORCH_NATIVE.match(name):
        return KernelKind.TORCH_NATIVE
    if _is_own(name, own_kernels):
        return KernelKind.OWN_TRITON
    if name in triton_launches:
        return KernelKind.OTHER_TRITON
    return KernelKind.UNKNOWN


def dsl_share(kernels: Iterable[tuple[str, str, float]]) -> float | None:
    """Share of device time spent in the entry's own Triton kernels.

    ``kernels``: (name, kind, device µs) triples. Copies count in the total: device time the
    entry spent moving memory is time its kernels did not do the work. Non-positive or NaN
    (or infinite) times are left out; None when nothing with device time remains.
    """
    own = total = 0.0
    for _name, kind, device_us in kernels:
        if not (math.isfinite(device_us) and device_us > 0):
            continue
        total += device_us
        if kind == KernelKind.OWN_TRITON:
            own += device_us
    return own / total if total > 0 else None
