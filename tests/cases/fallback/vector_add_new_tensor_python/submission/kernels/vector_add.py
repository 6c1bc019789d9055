def kernel(x, y):
    sums = [a + b for a, b in zip(x.tolist(), y.tolist())]
    return x.new_tensor(sums)
