"""Tensors across the sandbox boundary, in the safetensors layout, with no pickle.

A small codec of our own (8-byte little-endian header length, a JSON header, raw bytes) so the
harness needs nothing beyond torch, and the host parses entry-written files with explicit
limits. Non-tensor arguments (eps, flags) travel in the header's `__metadata__`.
Standard library and torch only: this module runs next to entry code.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import torch

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
CODES = {v: k for k, v in DTYPES.items()}
MAX_HEADER = 1 << 20


class TensorFileError(ValueError):
    pass


CHUNK = 64 << 20  # bytes moved between a device and a file at a time


def save(path: Path, values: tuple[Any, ...] | list[Any]) -> None:
    """Write `values` (tensors and JSON scalars, in order) to `path` atomically.

    A tensor goes to the file in chunks of CHUNK bytes, so that saving one on a device never
    holds a host copy of it whole (inputs reach tens of gigabytes).
    """
    header: dict[str, Any] = {}
    flats: list[torch.Tensor] = []
    args: list[dict[str, Any]] = []
    offset = 0
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            if v.dtype not in CODES:
                raise TensorFileError(f"value {i}: unsupported dtype {v.dtype}")
            t = v.detach().contiguous()
            flat = t.reshape(-1).view(torch.uint8) if t.numel() else \
                torch.empty(0, dtype=torch.uint8)
            name = f"t{i}"
            header[name] = {"dtype": CODES[t.dtype], "shape": list(t.shape),
                            "data_offsets": [offset, offset + flat.numel()]}
            flats.append(flat)
            offset += flat.numel()
            args.append({"tensor": name})
        elif v is None or isinstance(v, (bool, int, float, str)):
            args.append({"value": v})
        else:
            raise TensorFileError(f"value {i}: a {type(v).__name__}, not a tensor or scalar")
    header["__metadata__"] = {"args": json.dumps(args)}
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for flat in flats:
            for start in range(0, flat.numel(), CHUNK):
                f.write(flat[start : start + CHUNK].cpu().numpy().data)
    os.replace(tmp, path)


def load(path: Path, *, max_bytes: int | None = None, device: str = "cpu") -> list[Any]:
    """Read a file written by `save`, refusing anything malformed or larger than `max_bytes`.

    Each tensor is read straight into its own buffer (on a device, through one host buffer of
    CHUNK bytes), not through a copy of the whole file.
    """
    with open(path, "rb", opener=lambda p, fl: os.open(p, fl | os.O_NOFOLLOW)) as f:
        size = os.fstat(f.fileno()).st_size
        if max_bytes is not None and size > max_bytes:
            raise TensorFileError(f"{path.name}: {size} bytes, over the limit of {max_bytes}")
        if size < 8:
            raise TensorFileError(f"{path.name}: too short")
        (n,) = struct.unpack("<Q", f.read(8))
        if n > MAX_HEADER or 8 + n > size:
            raise TensorFileError(f"{path.name}: bad header length {n}")
        try:
            header = json.loads(f.read(n))
            args = json.loads(header.pop("__metadata__")["args"])
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise TensorFileError(f"{path.name}: bad header: {type(exc).__name__}") from None
        if not isinstance(args, list) or not isinstance(header, dict):
            raise TensorFileError(f"{path.name}: bad header: arguments are not a list")
        body = _Body(f, path.name, 8 + n, size - 8 - n, device)
        out: list[Any] = []
        for a in args:
            if not isinstance(a, dict) or len(a) != 1:
                raise TensorFileError(f"{path.name}: bad argument entry")
            if "value" in a:
                if not (a["value"] is None or isinstance(a["value"], (bool, int, float, str))):
                    raise TensorFileError(f"{path.name}: bad scalar")
                out.append(a["value"])
                continue
            out.append(body.tensor(header.get(a.get("tensor"))))
        return out


class _Body:
    """The tensor bytes of an open file: `length` bytes from `base`."""

    def __init__(self, f: Any, fname: str, base: int, length: int, device: str) -> None:
        self.f, self.fname, self.base, self.length, self.device = f, fname, base, length, device
        self.staging: torch.Tensor | None = None  # the host buffer of a load to a device

    def tensor(self, meta: Any) -> torch.Tensor:
        if not isinstance(meta, dict):
            raise TensorFileError(f"{self.fname}: bad tensor entry")
        try:
            dtype = DTYPES[meta["dtype"]]
            shape = [int(d) for d in meta["shape"]]
            start, end = (int(x) for x in meta["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise TensorFileError(f"{self.fname}: bad tensor entry {str(meta)[:100]}") from None
        if any(d < 0 for d in shape) or not 0 <= start <= end <= self.length:
            raise TensorFileError(f"{self.fname}: tensor offsets or shape out of range")
        numel = 1
        for d in shape:
            numel *= d
        itemsize = torch.empty((), dtype=dtype).element_size()
        if numel * itemsize != end - start:
            raise TensorFileError(f"{self.fname}: shape {shape} does not match "
                                  f"{end - start} bytes")
        raw = torch.empty(end - start, dtype=torch.uint8, device=self.device)
        self.f.seek(self.base + start)
        if raw.device.type == "cpu":
            self._read_into(raw)
        else:
            if self.staging is None:
                self.staging = torch.empty(min(CHUNK, self.length), dtype=torch.uint8)
            for at in range(0, raw.numel(), CHUNK):
                piece = self.staging[: min(CHUNK, raw.numel() - at)]
                self._read_into(piece)
                raw[at : at + piece.numel()].copy_(piece)
        return raw.view(dtype).reshape(shape)

    def _read_into(self, buf: torch.Tensor) -> None:
        view = buf.numpy().data.cast("B")
        got = 0
        while got < len(view):
            k = self.f.readinto(view[got:])
            if not k:
                raise TensorFileError(f"{self.fname}: truncated")
            got += k
