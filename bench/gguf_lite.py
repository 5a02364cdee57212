"""Reading a GGUF file's metadata and writing a GGUF file, in plain Python.

For benchmark machines that have Python but not numpy or the `gguf`
package (the GPU machines of bench/gpu.py). Only what the benchmarks need:
every metadata value type, and tensors whose bytes a callback writes.
Layout (GGUF version 3): the magic, version, tensor and key counts, the
keys with typed values, the tensor descriptions (name, dimensions from the
fastest-varying, type, offset), padding to the alignment, the data.
"""

import struct

MAGIC = b"GGUF"
ALIGNMENT = 32

# Metadata value types.
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
SCALARS = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i", FLOAT32: "<f",
           BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}

# Tensor types written here.
F32, F16 = 0, 1


class Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt):
        value = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return value

    def string(self):
        n = self.take("<Q")
        value = self.data[self.at:self.at + n].decode("utf-8", "replace")
        self.at += n
        return value

    def value(self, kind):
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            inner, n = self.take("<I"), self.take("<Q")
            return (inner, [self.value(inner) for _ in range(n)])
        return self.take(SCALARS[kind])


def read_metadata(path) -> dict:
    """Every key of `path` as `key: (type, value)`; arrays as `(ARRAY, (inner type, values))`."""
    with open(path, "rb") as file:
        head = file.read(24)
        if head[:4] != MAGIC:
            raise SystemExit(f"{path}: not a GGUF file")
        # Metadata comes first and is small next to the tensors; read in growing pieces.
        size = 64 << 20
        while True:
            file.seek(0)
            data = file.read(size)
            try:
                reader = Reader(data)
                reader.take("<I")
                version, _, keys = reader.take("<I"), reader.take("<Q"), reader.take("<Q")
                if version < 2:
                    raise SystemExit(f"{path}: GGUF version {version} is not read")
                metadata = {}
                for _ in range(keys):
                    key = reader.string()
                    kind = reader.take("<I")
                    metadata[key] = (kind, reader.value(kind))
                return metadata
            except struct.error:
                if len(data) < size:
                    raise SystemExit(f"{path}: the metadata is cut short")
                size *= 4


def _value_bytes(kind, value) -> bytes:
    if kind == STRING:
        raw = value.encode("utf-8")
        return struct.pack("<Q", len(raw)) + raw
    if kind == ARRAY:
        inner, values = value
        return struct.pack("<IQ", inner, len(values)) + b"".join(_value_bytes(inner, v) for v in values)
    return struct.pack(SCALARS[kind], value)


def write(path, metadata: dict, tensors: list) -> None:
    """Writes `path`: `metadata` as `key: (type, value)`; `tensors` as
    `(name, dims fastest first, tensor type, byte count, write(file))`."""
    with open(path, "wb") as file:
        file.write(MAGIC + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
        for key, (kind, value) in metadata.items():
            file.write(_value_bytes(STRING, key) + struct.pack("<I", kind) + _value_bytes(kind, value))
        offset = 0
        for name, dims, kind, size, _ in tensors:
            file.write(_value_bytes(STRING, name) + struct.pack("<I", len(dims)))
            file.write(b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", kind, offset))
            offset += -(-size // ALIGNMENT) * ALIGNMENT
        file.write(b"\0" * (-file.tell() % ALIGNMENT))
        for _, _, _, size, write_data in tensors:
            start = file.tell()
            write_data(file)
            if file.tell() - start != size:
                raise SystemExit(f"wrote {file.tell() - start} bytes for a {size}-byte tensor")
            file.write(b"\0" * (-file.tell() % ALIGNMENT))
