"""Facts about PyTorch the static analyser needs without importing torch.

Taken from torch 2.13 (`dir(torch.Tensor)`, the dtypes in `torch`); a name added in a later
release is still caught dynamically, and static analysis of a method name it does not know
only misses, never wrongly flags.
"""

from __future__ import annotations

# Every public callable of torch.Tensor. Whether one may run in the kernel path is the
# policy's choice (its allowed op groups); this is only the universe of method names.
TENSOR_METHODS: frozenset[str] = frozenset(
    """
    abs abs_ absolute absolute_ acos acos_ acosh acosh_ add add_ addbmm addbmm_ addcdiv
    addcdiv_ addcmul addcmul_ addmm addmm_ addmv addmv_ addr addr_ adjoint all allclose
    amax amin aminmax angle any apply_ arccos arccos_ arccosh arccosh_ arcsin arcsin_
    arcsinh arcsinh_ arctan arctan2 arctan2_ arctan_ arctanh arctanh_ argmax argmin
    argsort argwhere as_strided as_strided_ as_strided_scatter as_subclass asin asin_
    asinh asinh_ atan atan2 atan2_ atan_ atanh atanh_ backward baddbmm baddbmm_ bernoulli
    bernoulli_ bfloat16 bincount bitwise_and bitwise_and_ bitwise_left_shift
    bitwise_left_shift_ bitwise_not bitwise_not_ bitwise_or bitwise_or_
    bitwise_right_shift bitwise_right_shift_ bitwise_xor bitwise_xor_ bmm bool
    broadcast_to byte cauchy_ ccol_indices cdouble ceil ceil_ cfloat chalf char cholesky
    cholesky_inverse cholesky_solve chunk clamp clamp_ clamp_max clamp_max_ clamp_min
    clamp_min_ clip clip_ clone coalesce col_indices conj conj_physical conj_physical_
    const_data_ptr contiguous copy_ copysign copysign_ corrcoef cos cos_ cosh cosh_
    count_nonzero cov cpu cross crow_indices cuda cummax cummin cumprod cumprod_ cumsum
    cumsum_ data_ptr deg2rad deg2rad_ dense_dim dequantize det detach detach_ diag
    diag_embed diagflat diagonal diagonal_scatter diff digamma digamma_ dim dim_order dist
    div div_ divide divide_ dot double dsplit eig element_size eq eq_ equal erf erf_ erfc
    erfc_ erfinv erfinv_ exp exp2 exp2_ exp_ expand expand_as expm1 expm1_ exponential_
    fill_ fill_diagonal_ fix fix_ flatten flip fliplr flipud float float_power
    float_power_ floor floor_ floor_divide floor_divide_ fmax fmin fmod fmod_ frac frac_
    frexp gather gcd gcd_ ge ge_ geometric_ geqrf ger get_device greater greater_
    greater_equal greater_equal_ gt gt_ half hardshrink hash_tensor heaviside heaviside_
    histc histogram hsplit hypot hypot_ i0 i0_ igamma igamma_ igammac igammac_ index
    index_add index_add_ index_copy index_copy_ index_fill index_fill_ index_put
    index_put_ index_reduce index_reduce_ index_select indices inner int int_repr inverse
    ipu is_coalesced is_complex is_conj is_contiguous is_distributed is_floating_point
    is_inference is_neg is_nonzero is_pinned is_same_size is_set_to is_shared is_signed
    isclose isfinite isinf isnan isneginf isposinf isreal istft item kron kthvalue lcm
    lcm_ ldexp ldexp_ le le_ lerp lerp_ less less_ less_equal less_equal_ lgamma lgamma_
    log log10 log10_ log1p log1p_ log2 log2_ log_ log_normal_ log_softmax logaddexp
    logaddexp2 logcumsumexp logdet logical_and logical_and_ logical_not logical_not_
    logical_or logical_or_ logical_xor logical_xor_ logit logit_ logsumexp long lstsq lt
    lt_ lu lu_solve map2_ map_ masked_fill masked_fill_ masked_scatter masked_scatter_
    masked_select matmul matrix_exp matrix_power max maximum mean median min minimum mm
    mode module_load moveaxis movedim msort mtia mul mul_ multinomial multiply multiply_
    mv mvlgamma mvlgamma_ nan_to_num nan_to_num_ nanmean nanmedian nanquantile nansum
    narrow narrow_copy ndimension ne ne_ neg neg_ negative negative_ nelement new
    new_empty new_empty_strided new_full new_ones new_tensor new_zeros nextafter
    nextafter_ nonzero nonzero_static norm normal_ not_equal not_equal_ numel numpy orgqr
    ormqr outer permute pin_memory pinverse polygamma polygamma_ positive pow pow_ prelu
    prod put put_ q_per_channel_axis q_per_channel_scales q_per_channel_zero_points
    q_scale q_zero_point qr qscheme quantile rad2deg rad2deg_ random_ ravel reciprocal
    reciprocal_ record_stream register_hook register_post_accumulate_grad_hook reinforce
    relu relu_ remainder remainder_ renorm renorm_ repeat repeat_interleave requires_grad_
    reshape reshape_as resize resize_ resize_as resize_as_ resize_as_sparse_ resolve_conj
    resolve_neg retain_grad roll rot90 round round_ row_indices rsqrt rsqrt_ scatter
    scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_ select select_scatter
    set_ sgn sgn_ share_memory_ short sigmoid sigmoid_ sign sign_ signbit sin sin_ sinc
    sinc_ sinh sinh_ size slice_inverse slice_scatter slogdet smm softmax solve sort
    sparse_dim sparse_mask sparse_resize_ sparse_resize_and_clear_ split split_with_sizes
    sqrt sqrt_ square square_ squeeze squeeze_ sspaddmm std stft storage storage_offset
    storage_type stride sub sub_ subtract subtract_ sum sum_to_size svd swapaxes swapaxes_
    swapdims swapdims_ symeig t t_ take take_along_dim tan tan_ tanh tanh_ tensor_split
    tile to to_dense to_mkldnn to_padded_tensor to_sparse to_sparse_bsc to_sparse_bsr
    to_sparse_coo to_sparse_csc to_sparse_csr tolist topk trace transpose transpose_
    triangular_solve tril tril_ triu triu_ true_divide true_divide_ trunc trunc_ type
    type_as unbind unflatten unfold uniform_ unique unique_consecutive unsafe_chunk
    unsafe_split unsafe_split_with_sizes unsqueeze unsqueeze_ untyped_storage values var
    vdot view view_as vsplit where xlogy xlogy_ xpu zero_
    """.split()
) | {
    # Operator dunders called by name (x.__matmul__(y)) compute just like the operator.
    "__matmul__", "__rmatmul__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
    "__rmul__", "__truediv__", "__rtruediv__", "__floordiv__", "__pow__", "__rpow__",
    "__neg__", "__iadd__", "__imul__", "__isub__", "__itruediv__", "__imatmul__",
}

# Tensor method names shared with Python's own containers, strings and loggers (set.add,
# list.sort, str.index, dict.values, queue.put, logger.log): flagged only on a receiver
# known to be a tensor, so honest host code is never mistaken for a fallback.
AMBIGUOUS_METHODS: frozenset[str] = frozenset(
    {"add", "sort", "index", "values", "indices", "put", "log", "split", "copy_", "type",
     "map_", "apply_", "resize", "storage", "new", "count_nonzero", "mode", "item"}
)

TORCH_DTYPES: frozenset[str] = frozenset(
    """
    bfloat16 bit bits16 bits1x8 bits2x4 bits4x2 bits8 bool cdouble cfloat chalf complex128
    complex32 complex64 double float float16 float32 float4_e2m1fn_x2 float64
    float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz float8_e8m0fnu half int int1
    int16 int2 int3 int32 int4 int5 int6 int64 int7 int8 long qint32 qint8 quint2x4
    quint4x2 quint8 short uint1 uint16 uint2 uint3 uint32 uint4 uint5 uint6 uint64 uint7
    uint8
    """.split()
)

# torch attributes that are plain values, not callables: memory formats, layouts, quantisation
# schemes and math constants (torch.contiguous_format, torch.strided, torch.inf). Naming one
# computes nothing, wherever it appears; calling one would only raise.
TORCH_CONSTANTS: frozenset[str] = frozenset(
    """
    contiguous_format channels_last channels_last_3d preserve_format strided sparse_coo
    sparse_csr sparse_csc sparse_bsr sparse_bsc jagged per_tensor_affine per_channel_affine
    per_tensor_symmetric per_channel_symmetric per_channel_affine_float_qparams inf nan pi e
    """.split()
)

# Dtypes narrower than float32: converting to one in host code is a precision downgrade.
LOW_PRECISION_DTYPES: frozenset[str] = frozenset(
    d for d in TORCH_DTYPES if d in {"float16", "half", "bfloat16"} or d.startswith("float8")
    or d.startswith("float4")
)
LOW_PRECISION_METHODS: frozenset[str] = frozenset({"half", "bfloat16"})
# torch.nn.Module.compile: torch.compile under a method's name, on any receiver no name resolves
MODULE_COMPILE = "compile"

# torch submodules: naming one (F = torch.nn.functional) is not a call of anything.
TORCH_MODULES: frozenset[str] = frozenset(
    {"torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.modules",
     "torch.cuda", "torch.linalg", "torch.fft", "torch.special", "torch.backends",
     "torch.backends.cuda", "torch.backends.cudnn", "torch.utils", "torch.autograd",
     "torch.testing", "torch.sparse", "torch.nested", "torch.amp", "torch.cpu",
     "torch.types", "torch.version", "torch.accelerator", "torch.distributions", "torch.xpu",
     "torch.npu", "torch.mps", "torch.mtia", "torch.musa", "torch.hpu"}
)

# Attributes only tensors have (among what host code touches): reading one proves the
# receiver is a tensor, which lets `x * 2` and `x.add(y)` be judged.
TENSOR_ONLY_ATTRS: frozenset[str] = frozenset(
    {"shape", "stride", "dtype", "device", "is_contiguous", "data_ptr", "numel", "is_cuda",
     "element_size", "storage_offset", "contiguous", "view", "unsqueeze", "squeeze",
     "permute", "transpose", "expand", "size", "ndim", "dim", "new_empty", "empty_like"}
)

# Attributes that hand out frames, globals or the class graph: how entries have reached the
# harness's locals and the reference's outputs.
FRAME_ATTRS: frozenset[str] = frozenset(
    {"f_back", "f_globals", "f_locals", "f_builtins", "f_code", "__globals__", "__closure__",
     "__code__", "gi_frame", "cr_frame", "ag_frame", "tb_frame", "tb_next", "__subclasses__",
     "__bases__", "__mro__", "__base__"}
)

# Tensor subclass hooks: defining one intercepts the harness's own torch calls.
TORCH_HOOKS: frozenset[str] = frozenset({"__torch_function__", "__torch_dispatch__"})

# The `operator` module's spellings of Python's operators. `operator.matmul(a, b)` is `a @ b`
# (always compute, like the operator); the others compute when an operand is a tensor.
OPERATOR_MATMUL: frozenset[str] = frozenset(
    {"operator.matmul", "operator.imatmul", "operator.__matmul__", "operator.__imatmul__"}
)
OPERATOR_ARITH: frozenset[str] = frozenset(
    f"operator.{name}" for base in """
    add sub mul truediv floordiv mod pow lshift rshift and_ or_ xor neg pos invert inv abs
    lt le eq ne ge gt iadd isub imul itruediv ifloordiv imod ipow ilshift irshift iand ior
    ixor
    """.split() for name in (base, f"__{base.rstrip('_')}__")
)

# Attribute names of the grader's instruments (TM004), judged whatever the receiver resolves
# to (`knobs.runtime.launch_enter_hook` read through any alias): Triton's launch and compile
# hooks, the dispatch-mode stack, the profiler's state. No kernel has a reason to look.
INSTRUMENT_ATTRS: frozenset[str] = frozenset(
    {"launch_enter_hook", "launch_exit_hook", "jit_post_compile_hook", "jit_cache_hook",
     "kernel_load_start_hook", "kernel_load_end_hook", "kernel_unload_hook",
     "add_stages_inspection_hook", "_get_current_dispatch_mode",
     "_get_current_dispatch_mode_stack", "_len_torch_dispatch_stack", "_get_dispatch_mode",
     "_get_torch_dispatch_mode", "_DisableTorchDispatch", "_pop_mode_temporarily",
     "_pop_torch_dispatch_stack", "_push_on_torch_dispatch_stack", "_set_dispatch_mode",
     "_is_torch_function_mode_enabled", "_profiler_enabled", "kineto_results",
     "kineto_available", "_disable_current_modes", "is_in_torch_dispatch_mode",
     "any_torch_dispatch_mode_on"}
)

# Protocols through which another library sees a tensor's memory without a copy (FB006).
ARRAY_PROTOCOL_ATTRS: frozenset[str] = frozenset(
    {"__array_interface__", "__cuda_array_interface__", "__dlpack__", "__dlpack_device__",
     "__array__", "__array_struct__"}
)

# Methods of the classes that autograd runs only when gradients are asked for. An inference
# entry never does (asking is itself compute: x.backward(), torch.autograd.grad), so these
# are out of kernel()'s reach (Liger-Kernel's ops define them beside forward).
AUTOGRAD_ONLY_METHODS: frozenset[str] = frozenset({"backward", "jvp", "vjp", "vmap"})
AUTOGRAD_FUNCTIONS: frozenset[str] = frozenset(
    {"torch.autograd.Function", "torch.autograd.function.Function",
     "torch.autograd.function.InplaceFunction"}
)
