def kernel(x, y):
    hoard = []
    while True:
        hoard.append(bytearray(256 << 20))
