def not_kernel(x, y):
    return x
