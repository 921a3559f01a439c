"""A small safetensors reader and writer (header JSON + raw little-endian data), so the smoke
tools need nothing beyond torch: the format is an 8-byte header length, the JSON header
{name: {dtype, shape, data_offsets}}, then the tensor bytes."""
import json
import struct

import torch

TORCH_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}
# Integer types of the same width, so the bytes can be moved through numpy without a float
# conversion (numpy has no bfloat16).
SAME_WIDTH_INT = {"BF16": torch.int16, "F16": torch.int16, "F32": torch.int32}


def read_raw(path):
    """Returns (header dict without __metadata__, metadata, data bytes)."""
    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_len])
    metadata = header.pop("__metadata__", None)
    return header, metadata, blob[8 + header_len:]


def write_raw(path, header, metadata, data):
    full = dict(header)
    if metadata is not None:
        full["__metadata__"] = metadata
    encoded = json.dumps(full, separators=(",", ":")).encode()
    # The reference writer pads the header with spaces to a multiple of 8 bytes.
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        f.write(data)


def tensor_from_bytes(dtype_name, shape, raw):
    if dtype_name not in TORCH_DTYPES:
        raise ValueError(f"dtype {dtype_name} is not supported by the smoke reader")
    bits = torch.frombuffer(bytearray(raw), dtype=SAME_WIDTH_INT[dtype_name]) if raw else \
        torch.empty(0, dtype=SAME_WIDTH_INT[dtype_name])
    return bits.view(TORCH_DTYPES[dtype_name]).reshape(shape)


def tensor_to_bytes(tensor):
    dtype_name = DTYPE_NAMES[tensor.dtype]
    return tensor.contiguous().view(SAME_WIDTH_INT[dtype_name]).numpy().tobytes()


def load(path):
    header, metadata, data = read_raw(path)
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = tensor_from_bytes(entry["dtype"], entry["shape"], data[begin:end])
    return tensors, metadata


def save(path, tensors, metadata=None):
    """Tensors in name order, as the reference writer lays them out."""
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        raw = tensor_to_bytes(tensors[name])
        header[name] = {"dtype": DTYPE_NAMES[tensors[name].dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    write_raw(path, header, metadata if metadata is not None else {"format": "pt"}, b"".join(chunks))
