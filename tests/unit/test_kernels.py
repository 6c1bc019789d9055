"""Kernel attribution on real H200 profiler traces (tests/data/README.md says where from)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from grader.detect.kernels import KernelKind, classify, dsl_share

DATA = Path(__file__).resolve().parents[1] / "data" / "h200-torch2.11-kernels.json"
OWN = {"my_add_kernel"}  # the @triton.jit function in shared/traces/record.py

K = KernelKind
GEMM = {K.VENDOR, K.COPY}  # cuBLAS zeroes its workspace first (Memset) in most cases
NATIVE = {K.TORCH_NATIVE}

# Every kind each recorded operation's kernels fall into: no more, no fewer.
EXPECTED: dict[str, set[KernelKind]] = {
    "matmul_bf16": GEMM,
    "matmul_fp32": {K.VENDOR},
    "matmul_fp32_tf32": GEMM,
    "matmul_fp16": GEMM,
    "linear_bf16": GEMM,
    "bmm_bf16": {K.VENDOR},
    "addmm_bf16": GEMM,  # Memcpy of the bias into the output, then nvjet
    "aten_ops_mm": GEMM,
    "scaled_mm_fp8": GEMM,
    "sdpa_default": {K.VENDOR, K.COPY},  # cuDNN
    "sdpa_cudnn": {K.VENDOR, K.COPY},
    "sdpa_flash": {K.VENDOR},  # pytorch_flash::
    "sdpa_efficient": {K.VENDOR},  # fmha_cutlassF
    # elementwise + softmax + two cuBLAS GEMMs, and PyTorch's copy kernels (copies, allowed)
    "sdpa_math": {K.TORCH_NATIVE, K.VENDOR, K.COPY},
    "conv2d_bf16": {K.VENDOR},  # cudnn:: layout kernels + xmma implicit GEMM
    "softmax_bf16": NATIVE,
    "layer_norm_bf16": NATIVE,
    "rms_norm_bf16": NATIVE,
    "silu_bf16": NATIVE,
    "gelu_bf16": NATIVE,
    "add_fp32": NATIVE,
    "mul_fp32": NATIVE,
    "sum_fp32": {K.TORCH_NATIVE, K.COPY},
    "cumsum_fp32": NATIVE,  # at_cuda_detail::cub
    "topk_bf16": {K.TORCH_NATIVE, K.COPY},
    "sort_fp32": {K.TORCH_NATIVE, K.COPY},
    "embedding_bf16": NATIVE,
    "index_add_fp32": {K.TORCH_NATIVE, K.COPY},
    "copy_fp32": {K.COPY},
    # PyTorch's copy kernels behind contiguous() and .to(dtype): copies, which the policy allows
    "contiguous_transpose_bf16": {K.COPY},
    "to_dtype": {K.COPY},
    "own_triton_add": {K.OWN_TRITON},
    "inductor_compiled_pointwise": {K.OTHER_TRITON},
    "inductor_compiled_mm_softmax": {K.OTHER_TRITON, K.VENDOR, K.COPY},  # GEMM left to cuBLAS
}


def _cases() -> dict[str, Any]:
    cases: dict[str, Any] = json.loads(DATA.read_text())["cases"]
    return cases


def test_every_recorded_operation_has_an_expectation() -> None:
    cases = _cases()
    assert set(cases) == set(EXPECTED)
    assert not [name for name, case in cases.items() if "error" in case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_real_trace_kinds(case: str) -> None:
    kernels = _cases()[case]["kernels"]
    kinds = {classify(k["name"], OWN) for k in kernels}
    # No real kernel is left unattributed: UNKNOWN is never expected above.
    assert kinds == EXPECTED[case], {k["name"][:90]: classify(k["name"], OWN) for k in kernels}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_real_trace_dsl_share(case: str) -> None:
    kernels = _cases()[case]["kernels"]
    share = dsl_share([(k["name"], classify(k["name"], OWN), k["us"]) for k in kernels])
    assert share == (1.0 if case == "own_triton_add" else 0.0)


def test_library_kernels_with_own_names_are_not_owned() -> None:
    # Hostile: decoy jit functions named after the library kernels the entry really runs.
    nvjet = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
    inductor = "triton_poi_fused_add_mul_relu_0"
    decoys = {nvjet, inductor, "sm80", "triton", "at"}
    assert classify(nvjet, decoys) == KernelKind.VENDOR
    assert classify(inductor, decoys) == KernelKind.OTHER_TRITON
    assert classify("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8", decoys) == "vendor"
    assert classify("triton_red_fused__softmax_0", decoys) == KernelKind.OTHER_TRITON


def test_own_names_match_exactly_or_with_legacy_suffix() -> None:
    own = {"my_add_kernel", "matmul_kernel"}
    assert classify("my_add_kernel", own) == KernelKind.OWN_TRITON
    assert classify("matmul_kernel_0d1d2d3de4c", own) == KernelKind.OWN_TRITON  # Triton <= 2.1
    assert classify("my_add_kernel_fast", own) == KernelKind.UNKNOWN
    assert classify("my_add", own) == KernelKind.UNKNOWN
    assert classify("my_add_kernel", set()) == KernelKind.UNKNOWN


def test_triton_launch_record_never_makes_a_kernel_own() -> None:
    assert classify("_rms_norm_fwd", set(), triton_launches={"_rms_norm_fwd"}) == "other_triton"
    assert classify("gemm_kernel", set(), triton_launches={"other"}) == KernelKind.UNKNOWN


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        # Data to or from the host inside a call counts against the share (issue 17).
        ("Memcpy HtoD (Pinned -> Device)", KernelKind.HOST_COPY),
        ("Memcpy DtoD (Device -> Device)", KernelKind.COPY),
        (
            "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32>(int)",
            "vendor",
        ),
        ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128> >(Flash_fwd_params)", "vendor"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "vendor"),
        ("void gemv2T_kernel_val<int, int, float, float, float, 128, 16>(float)", "vendor"),
        ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn", "vendor"),
        ("void thrust::cuda_cub::core::_kernel_agent<int>(int)", KernelKind.TORCH_NATIVE),
        ("triton_", KernelKind.OTHER_TRITON),  # inductor with unique_kernel_names off
        ("triton_tem_fused_mm_0", KernelKind.OTHER_TRITON),
        ("void my_cuda_kernel<float>(float*, int)", KernelKind.UNKNOWN),  # load_inline, cupy
        ("gemv_kernel", KernelKind.UNKNOWN),  # a plain name could be anyone's Triton kernel
    ],
)
def test_names_not_in_the_trace(name: str, kind: str) -> None:
    assert classify(name, {"add_kernel"}) == kind


def test_dsl_share_weights_by_device_time() -> None:
    kernels = [
        ("my_add_kernel", "own_triton", 30.0),
        ("nvjet_x", "vendor", 60.0),
        ("Memset (Device)", "copy", 10.0),
        ("my_add_kernel", "own_triton", 0.0),
    ]
    assert dsl_share(kernels) == pytest.approx(0.3)


def test_dsl_share_without_device_time_is_none() -> None:
    assert dsl_share([]) is None
    assert dsl_share([("k", "own_triton", 0.0)]) is None
    assert dsl_share([("k", "own_triton", math.nan), ("k", "own_triton", math.inf)]) is None
    assert dsl_share([("k", "own_triton", 5.0), ("v", "vendor", -5.0)]) == 1.0


@pytest.mark.parametrize("name", [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
    "void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<c10::BFloat16>, "
    "std::array<char*, 1ul>, 4, TrivialOffsetCalculator<0, unsigned int>, "
    "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithoutCast, "
    "at::native::memory::StoreWithoutCast>(int, at::native::FillFunctor<c10::BFloat16>, "
    "std::array<char*, 1ul>, TrivialOffsetCalculator<0, unsigned int>, "
    "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithoutCast, "
    "at::native::memory::StoreWithoutCast)",
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
    "at::native::FillFunctor<float> >(at::TensorIteratorBase&, at::native::FillFunctor<float> "
    "const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::"
    "FillFunctor<float> >(at::TensorIteratorBase&, at::native::FillFunctor<float> "
    "const&)::{lambda(int)#1})",
])
def test_pytorch_fills_are_copies_not_torch_work(name: str) -> None:
    """zeros()/fill_() on the device: allowed by the policy, out of the share like a Memset."""
    assert classify(name, OWN) is K.COPY
    own = [("my_add_kernel", str(K.OWN_TRITON), 3.0), (name, str(K.COPY), 2.0)]
    assert dsl_share(own) == pytest.approx(0.6)  # counted in the total, as copies are


def test_an_elementwise_kernel_that_computes_is_torch_work() -> None:
    name = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<"
            "float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul>)")
    assert classify(name, OWN) is K.TORCH_NATIVE
