"""Writes the hand-made hostile inputs beside the cases the fuzzers found.

Each file is named after what it attacks; `tests/bad_input.rs` replays every
file under tests/fuzz_regressions/<target>/ through cake::fuzz_targets.
Run: python3 tests/fuzz_regressions/make_handmade.py
"""

import json
import struct
from pathlib import Path

HERE = Path(__file__).parent


def write(target: str, name: str, data: bytes) -> None:
    folder = HERE / target
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)


def frame(header: dict, payload: bytes = b"") -> bytes:
    body = json.dumps(header).encode()
    return struct.pack(">I", len(body)) + body + payload


# Cluster messages (after decryption).
write("cluster_message", "hidden_shape_whose_byte_count_overflows",
      frame({"type": "hidden", "shape": [1, 2**62, 1], "compute_nanos": 0}))
write("cluster_message", "forward_of_zero_positions", frame({"type": "forward", "sequence": 0, "shape": [1, 0, 8]}))
write("cluster_message", "load_with_no_files",
      frame({"type": "load", "manifest": {"key": "0" * 64, "gguf": True, "files": []}, "start": 0, "end": 1,
             "dtype": None}))
write("cluster_message", "manifest_piece_of_2_62_bytes",
      frame({"type": "load", "start": 0, "end": 1, "dtype": None,
             "manifest": {"key": "0" * 64, "gguf": True,
                          "files": [{"name": "m.gguf", "len": 2**62, "pieces": [{"offset": 0, "len": 2**62}]}]}}))
write("cluster_message", "header_length_past_the_frame", struct.pack(">I", 0xFFFFFFFF) + b"{}")

# GGUF: version 3, 2^63 tensors, 2^63 metadata entries, nothing after.
write("gguf_header", "counts_of_2_63", b"GGUF" + struct.pack("<IQQ", 3, 2**63, 2**63))
# One string key claiming 2^64 - 1 bytes.
write("gguf_header", "key_of_2_64_bytes", b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 2**64 - 1) + b"abc")

# safetensors: a header length past the end, and offsets that wrap.
write("safetensors_header", "header_length_of_2_40", struct.pack("<Q", 2**40) + b"{}")
header = json.dumps({"t": {"dtype": "F32", "shape": [2**32, 2**32, 4], "data_offsets": [0, 4]}}).encode()
write("safetensors_header", "shape_whose_size_overflows", struct.pack("<Q", len(header)) + header + b"\0" * 4)

# WAV: 16-bit mono 44.1 kHz whose data chunk claims 4 GB but holds 4 bytes.
fmt = struct.pack("<HHIIHH", 1, 1, 44100, 88200, 2, 16)
wav = b"WAVEfmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", 0xFFFFFFFF) + b"\1\0\2\0"
write("wav", "data_chunk_claiming_4_gb", b"RIFF" + struct.pack("<I", len(wav)) + wav)

# Chat templates from a hostile GGUF file: work and output without end.
write("chat_template", "nested_loops_of_10_10_steps",
      b"{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}")
write("chat_template", "string_of_a_gigabyte", b"{{ 'x' * 1000000000 }}")
write("chat_template", "recursive_macro", b"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")

# torch.save pickles (voice presets): a memo slot of 4 billion, a string claiming 4 GB, and
# a value that doubles 64 times through the memo (fetch, fetch, pair, store).
write("torch_pickle", "memo_slot_of_4_billion", b"\x80\x02}r\xff\xff\xff\xff.")
write("torch_pickle", "string_claiming_4_gb", b"\x80\x02X\xff\xff\xff\xffabc.")
write("torch_pickle", "value_doubled_64_times", b"\x80\x02Nq\x00" + b"h\x00h\x00\x86q\x00" * 64 + b".")

# The master's side of a load: one listed chunk asked for 300 times in
# each of three rounds, and a chunk the manifest does not list.
chunk = {"file": 1, "offset": 1000, "len": 4 << 20}
need = frame({"type": "need_chunks", "chunks": [chunk] * 300})
write("master_load", "one_chunk_asked_for_300_times_three_rounds", need + b"\xff" + need + b"\xff" + need)
write("master_load", "chunk_past_the_manifest",
      frame({"type": "need_chunks", "chunks": [{"file": 1, "offset": 39 << 20, "len": 4 << 20}]}))

# A worker's step for a master's own config.json (after 5 bytes: context
# 2^k with k from the first two, positions from the next two, the format).
config = json.loads((HERE.parent / "fixtures/tiny/llama_tied/config.json").read_text())
claim = dict(config, max_position_embeddings=2**22)
write("worker_step", "context_of_2_22_claimed_by_the_config",
      struct.pack("<HHB", 22, 4, 1) + json.dumps(claim).encode())
write("worker_step", "step_of_4000_positions_in_f16",
      struct.pack("<HHB", 12, 4000, 1) + json.dumps(dict(config, max_position_embeddings=4096)).encode())
huge = dict(config, num_key_value_heads=2**20, head_dim=2**20, max_position_embeddings=2**30)
write("worker_step", "heads_and_context_of_2_20_and_2_30", struct.pack("<HHB", 30, 1, 0) + json.dumps(huge).encode())

# Pictures: a PNG header claiming 30 000 x 30 000 with a few bytes of
# pixels, a GIF whose screen and frame claim 65 535 x 65 535, a PNG whose
# pixel data stops short, and a JPEG whose EXIF block claims more entries
# than it holds.
def png_chunk(kind: bytes, data: bytes) -> bytes:
    import zlib
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
write("picture", "png_of_30000_by_30000",
      PNG_SIGNATURE + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0))
      + png_chunk(b"IDAT", bytes([0x78, 0x9C, 0x63, 0, 0, 0, 1, 0, 1])) + png_chunk(b"IEND", b""))
write("picture", "gif_bomb_65535_square",
      b"GIF89a" + bytes([0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0])
      + bytes([0x2C, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 2, 2, 0x44, 0x01, 0, 0x3B]))
write("picture", "png_cut_in_its_pixels",
      PNG_SIGNATURE + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 64, 64, 8, 2, 0, 0, 0))
      + png_chunk(b"IDAT", bytes([0x78, 0x9C, 0x63, 0x60]))[:-6])
write("picture", "jpeg_exif_claiming_65535_entries",
      b"\xFF\xD8\xFF\xE1" + struct.pack(">H", 2 + 6 + 10) + b"Exif\0\0" + b"II*\0\x08\0\0\0\xFF\xFF" + b"\xFF\xD9")
