def kernel(x):
    # x holds gate and up side by side ([tokens, 2 * inter]): Liger's fused gate-up variant
    # reads both halves of that one buffer.
    return LigerFusedGateUpSiLUMulFunction.apply(x)
