def kernel(x, residual, w, eps):
    # Returns (normed, new_residual), the problem's order; "gemma" normalises in fp32.
    return LigerFusedAddRMSNormFunction.apply(x, residual, w, eps, 0.0, "gemma")
