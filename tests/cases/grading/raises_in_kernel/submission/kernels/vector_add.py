def kernel(x, y):
    raise ValueError("nope")
