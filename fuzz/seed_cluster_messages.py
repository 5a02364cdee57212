"""Writes valid cluster messages (decrypted frames) as fuzzing seeds.

Usage: python3 fuzz/seed_cluster_messages.py <corpus folder>
The frames follow cluster/protocol.rs: [u32 big-endian header length]
[JSON header][payload].
"""

import json
import struct
import sys
from pathlib import Path


def frame(header: dict, payload: bytes = b"") -> bytes:
    body = json.dumps(header).encode()
    return struct.pack(">I", len(body)) + body + payload


manifest = {"key": "ab" * 32, "gguf": True,
            "files": [{"name": "m.gguf", "len": 5000, "pieces": [{"offset": 0, "len": 100}, {"offset": 1000, "len": 64}]}]}
hidden = struct.pack("<16f", *[0.5 * i for i in range(16)])
seeds = {
    "info": frame({"type": "info"}),
    "load": frame({"type": "load", "manifest": manifest, "start": 0, "end": 1, "dtype": "f32"}),
    "chunk": frame({"type": "chunk", "manifest_key": "ab" * 32, "chunk": {"file": 0, "offset": 0, "len": 100},
                    "sha256": "00" * 32}, struct.pack("<I", 100) + b"\x1f\x00" + b"\x00" * 6),
    "forward": frame({"type": "forward", "sequence": 1, "shape": [1, 2, 8]}, hidden),
    "forget": frame({"type": "forget", "sequence": 1}),
    "heartbeat": frame({"type": "heartbeat"}),
    "info_reply": frame({"type": "info", "name": "w", "os": "linux", "cpu": "x", "devices": ["cpu"],
                         "memory_bytes": 1 << 30, "bytes_per_second": 1e9}),
    "hidden_reply": frame({"type": "hidden", "shape": [1, 2, 8], "compute_nanos": 5}, hidden),
    "need_chunks": frame({"type": "need_chunks", "chunks": [{"file": 0, "offset": 0, "len": 100}]}),
    "error_reply": frame({"type": "error", "message": "no"}),
}
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for name, data in seeds.items():
    (out / f"seed-{name}").write_bytes(data)
