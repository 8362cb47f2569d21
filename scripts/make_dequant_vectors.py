#!/usr/bin/env python3
"""Writes tests/data/dequant_vectors.bin: golden dequantization vectors from gguf-py's numpy
reference dequantizers (gguf.quants.dequantize), read by tests/unit/model/dequant_test.cpp.

Run (from the repository root):
    python3 -m venv .venv && .venv/bin/pip install gguf numpy
    .venv/bin/python scripts/make_dequant_vectors.py
(on the project machines a ready venv exists: /opt/refvenv/bin/python scripts/make_dequant_vectors.py)

Inputs are random blocks: random bytes for the quants, and the fp16 scale fields overwritten by
finite random halves (normals and subnormals, both signs for d/m; never NaN or inf). F16/BF16
inputs are random bit patterns except NaN (inf, -0 and subnormals included). Fixed seed, so
re-running with the same gguf/numpy versions reproduces the file byte for byte.

File format (all little-endian):
    char[4] magic "CVDQ"; u32 version (=1); u32 n_cases;
    u32 len; char[len] "gguf <version> numpy <version>";
    n_cases x { u32 ggml_type_id; u32 n_elements; u32 n_bytes; u8[n_bytes] raw;
                f32[n_elements] expected }
"""

import struct
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

MAGIC = b"CVDQ"
VERSION = 1
OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "dequant_vectors.bin"

# type -> (block elements, block bytes, number of blocks, byte offsets of fp16 scale fields,
#          whether those scales may be negative)
CASES = {
    T.F32: (1, 4, 512, (), False),
    T.F16: (1, 2, 2048, (), False),
    T.BF16: (1, 2, 2048, (), False),
    T.Q4_0: (32, 18, 64, (0,), True),
    T.Q4_1: (32, 20, 64, (0, 2), True),
    T.Q5_0: (32, 22, 64, (0,), True),
    T.Q5_1: (32, 24, 64, (0, 2), True),
    T.Q8_0: (32, 34, 64, (0,), True),
    T.Q4_K: (256, 144, 8, (0, 2), False),
    T.Q5_K: (256, 176, 8, (0, 2), False),
    T.Q6_K: (256, 210, 8, (208,), True),
}


def random_halves(rng: np.random.Generator, n: int, signed: bool) -> np.ndarray:
    """Finite fp16 values spanning subnormals to ~1, as raw uint16."""
    mag = np.exp2(rng.uniform(-24.0, 0.0, n)).astype(np.float16)
    if signed:
        mag = np.where(rng.random(n) < 0.5, -mag, mag).astype(np.float16)
    assert np.all(np.isfinite(mag))
    return mag.view(np.uint16)


def random_non_nan_u16(rng: np.random.Generator, n: int, exp_mask: int, mant_mask: int) -> np.ndarray:
    bits = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    nan = ((bits & exp_mask) == exp_mask) & ((bits & mant_mask) != 0)
    return np.where(nan, bits & ~np.uint16(exp_mask & ~(exp_mask >> 1)), bits).astype(np.uint16)


def make_case(rng: np.random.Generator, qtype: T) -> tuple[bytes, np.ndarray]:
    elems, nbytes, nblocks, scale_offsets, signed = CASES[qtype]
    if qtype == T.F32:
        raw = rng.standard_normal(nblocks).astype(np.float32).view(np.uint8)
    elif qtype == T.F16:
        raw = random_non_nan_u16(rng, nblocks, 0x7C00, 0x03FF).view(np.uint8)
    elif qtype == T.BF16:
        raw = random_non_nan_u16(rng, nblocks, 0x7F80, 0x007F).view(np.uint8)
    else:
        blocks = rng.integers(0, 256, (nblocks, nbytes), dtype=np.uint16).astype(np.uint8)
        for off in scale_offsets:
            blocks[:, off:off + 2] = random_halves(rng, nblocks, signed).view(np.uint8).reshape(nblocks, 2)
        raw = blocks.reshape(-1)
    expected = np.asarray(dequantize(raw, qtype), dtype=np.float32).reshape(-1)
    assert expected.size == elems * nblocks, (qtype.name, expected.size)
    assert not np.any(np.isnan(expected)), qtype.name
    return raw.tobytes(), expected


def main() -> int:
    rng = np.random.default_rng(20240917)
    stamp = f"gguf {version('gguf')} numpy {np.__version__}".encode()
    out = bytearray(MAGIC + struct.pack("<II", VERSION, len(CASES)))
    out += struct.pack("<I", len(stamp)) + stamp
    for qtype in CASES:
        raw, expected = make_case(rng, qtype)
        out += struct.pack("<III", int(qtype), expected.size, len(raw)) + raw
        out += expected.astype("<f4").tobytes()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(bytes(out))
    print(f"wrote {OUT} ({len(out)} bytes, {len(CASES)} cases, {stamp.decode()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
