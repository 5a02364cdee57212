#!/usr/bin/env python3
"""Fetches llama.cpp's tokenizer test vocabularies once, for the tests.

llama.cpp keeps a vocabulary-only GGUF per tokenizer family in `models/`
(`ggml-vocab-<name>.gguf`), with test strings (`.gguf.inp`) and the ids the
family's reference tokenizer gives them (`.gguf.out`). They ship inside
llama-cpp-python's source archive on PyPI, under `vendor/llama.cpp/models/`.
This downloads that archive (pinned by SHA-256; pip cannot fetch it here
without building it), and extracts only those files into
`~/.cache/cake-test/llama-vocabs-<version>` (or `$CAKE_LLAMA_VOCABS`), which
`tests/gguf_vocabularies.rs` reads. A second run finds them and does nothing.
"""

import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from pinned_download import cache_root, download

VERSION = "0.3.36"
URL = (
    "https://files.pythonhosted.org/packages/ec/e9/"
    "e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/"
    f"llama_cpp_python-{VERSION}.tar.gz"
)
SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
MODELS = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/models/"
COMPLETE = ".complete"


def target_dir() -> Path:
    if os.environ.get("CAKE_LLAMA_VOCABS"):
        return Path(os.environ["CAKE_LLAMA_VOCABS"])
    return cache_root() / f"llama-vocabs-{VERSION}"


def main() -> int:
    target = target_dir()
    if (target / COMPLETE).exists():
        print(f"llama.cpp test vocabularies present: {target}")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        archive = download(URL, SHA256, Path(tmp))
        staged = Path(tmp) / "vocabs"
        staged.mkdir()
        count = 0
        with tarfile.open(archive) as tar:
            for member in tar:
                name = member.name.removeprefix(MODELS)
                if name == member.name or "/" in name or not name.startswith("ggml-vocab-") or not member.isfile():
                    continue
                with tar.extractfile(member) as src, open(staged / name, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                count += 1
        if count == 0:
            raise SystemExit(f"error: no ggml-vocab-* files under {MODELS} in {URL}")
        (staged / COMPLETE).write_text(SHA256 + "\n")
        if target.exists():
            shutil.rmtree(target)
        staged.rename(target)
    print(f"llama.cpp test vocabularies installed: {target} ({count} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
