import sys
import types

sys.modules["torch"] = types.ModuleType("torch")


def kernel(x, y):
    return x
