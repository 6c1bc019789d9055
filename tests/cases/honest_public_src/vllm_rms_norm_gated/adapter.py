def kernel(x, w, eps):
    # Without a gate (z=None) and a bias, rms_norm_gated is a plain RMSNorm, fp32 inside.
    return rms_norm_gated(x, w, None, eps=eps)
