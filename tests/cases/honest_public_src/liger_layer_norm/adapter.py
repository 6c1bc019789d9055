def kernel(x, w, b, eps):
    return LigerLayerNormFunction.apply(x, w, b, eps)
