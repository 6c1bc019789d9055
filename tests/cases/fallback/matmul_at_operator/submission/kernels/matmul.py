"""matmul with the @ operator."""


def kernel(a, b):
    return a @ b
