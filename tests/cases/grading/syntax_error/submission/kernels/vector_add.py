def kernel(x, y)
    return x
