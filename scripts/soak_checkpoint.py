#!/usr/bin/env python3
"""scripts/soak_checkpoint.py — reads a mixlab checkpoint without LibTorch, for scripts/soak.sh.

  soak_checkpoint.py check PATH      is the file intact? prints "step N" (exit 0) or why not (exit 1)
  soak_checkpoint.py compare A B     are the two checkpoints' contents equal bit for bit? (exit 0/1)

A checkpoint (mixlab/train/checkpoint.h) is one header line
"mixlab-checkpoint 2 <payload bytes> <FNV-1a 64 of the payload, hex>" and a torch archive (a zip
holding data.pkl, a pickle of the entries, and data/<n>, the tensors' storages). This is a
second, independent reader: `check` verifies the header, the size, the checksum, every zip
member's CRC and that the pickle holds the entries format, config, step, model, optimizer and rng.

`compare` compares contents, not file bytes: LibTorch keys the optimizer's per-parameter state by
the address of the parameter's TensorImpl ("0x55e9..."), so two runs with identical weights and
moments write different keys (and the storages in another order). The keys are mapped to the
parameter's position in its param group first (the archive's param_groups list them in order);
then every entry, every tensor's dtype, shape, strides and bytes, must be equal.
"""
import io
import pickle
import sys
import zipfile

MAGIC = b"mixlab-checkpoint"
VERSION = 2
ENTRIES = ("format", "config", "step", "model", "optimizer", "rng")


class CheckpointError(Exception):
    pass


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


class Tensor:
    """A tensor as stored: its storage's bytes (the slice it views) and its layout."""

    def __init__(self, dtype, data, offset, size, stride):
        self.dtype, self.offset, self.size, self.stride = dtype, offset, tuple(size), tuple(stride)
        self.data = data

    def key(self):
        return (self.dtype, self.offset, self.size, self.stride, self.data)

    def __repr__(self):
        return f"tensor({self.dtype}, shape {list(self.size)})"


class Object(dict):
    """A TorchScript object (a module or an archive): its attributes."""

    def __setstate__(self, state):
        self.update(state)


class ArchiveUnpickler(pickle.Unpickler):
    """Unpickles data.pkl into dicts and Tensors, never importing torch."""

    def __init__(self, data, zip_file, prefix):
        super().__init__(io.BytesIO(data))
        self.zip_file, self.prefix = zip_file, prefix

    def find_class(self, module, name):
        if module.startswith("__torch__"):
            return Object
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return lambda storage, offset, size, stride, *rest: Tensor(storage[0], storage[1], offset, size, stride)
        if module == "torch" and name.endswith("Storage"):
            return name
        if module == "collections" and name == "OrderedDict":
            return dict
        raise CheckpointError(f"data.pkl refers to {module}.{name}, which a checkpoint does not hold")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise CheckpointError(f"data.pkl has a persistent id {pid!r}; expected ('storage', type, key, device, n)")
        _, storage_type, key, _, _ = pid
        return storage_type, self.zip_file.read(f"{self.prefix}data/{key}")


def read(path):
    """The checkpoint's entries, verified; raises CheckpointError saying what is wrong."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise CheckpointError(f"cannot read: {e.strerror}")
    nl = raw.find(b"\n", 0, 200)
    if not raw.startswith(MAGIC) or nl < 0:
        raise CheckpointError(f"no '{MAGIC.decode()} {VERSION}' header line (file of {len(raw)} bytes)")
    fields = raw[:nl].split()
    if len(fields) != 4 or fields[1] != str(VERSION).encode():
        raise CheckpointError(f"malformed header {raw[:nl]!r}; expected '{MAGIC.decode()} {VERSION} <bytes> <hex>'")
    payload = raw[nl + 1 :]
    if int(fields[2]) != len(payload):
        raise CheckpointError(f"the header says {int(fields[2])} payload bytes, the file has {len(payload)}")
    if int(fields[3], 16) != fnv1a64(payload):
        raise CheckpointError(f"checksum mismatch: header {fields[3].decode()}, payload {fnv1a64(payload):016x}")
    try:
        z = zipfile.ZipFile(io.BytesIO(payload))
        bad = z.testzip()
    except zipfile.BadZipFile as e:
        raise CheckpointError(f"the payload is not a torch archive: {e}")
    if bad is not None:
        raise CheckpointError(f"zip member '{bad}' fails its CRC")
    pkl = [n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pkl) != 1:
        raise CheckpointError(f"expected one <archive>/data.pkl, found {pkl}")
    entries = ArchiveUnpickler(z.read(pkl[0]), z, pkl[0][: -len("data.pkl")]).load()
    missing = [e for e in ENTRIES if e not in entries]
    if missing:
        raise CheckpointError(f"missing entries {missing}")
    return entries


def normalized(entries):
    """The entries with the optimizer's state keyed by (param group, position), not addresses."""
    optimizer = dict(entries["optimizer"])
    groups = optimizer.get("param_groups", {})
    position = {}  # address key -> "param_groups/<g>/params/<i>"
    for group_name, group in groups.items():
        if not isinstance(group, dict):
            continue  # "param_groups/size"
        for k, v in group.items():
            if k.startswith("params/") and k != "params/size":
                position[v] = f"{group_name}/{k}"
    groups = {
        name: {k: (position[v] if k.startswith("params/") and k != "params/size" else v) for k, v in group.items()}
        if isinstance(group, dict)
        else group
        for name, group in groups.items()
    }
    state = optimizer.get("state", {})
    unknown = [k for k in state if k not in position]
    if unknown:
        raise CheckpointError(f"optimizer state for {unknown[:3]} that no param group lists")
    optimizer["state"] = {position[k]: v for k, v in state.items()}
    optimizer["param_groups"] = groups
    return {**entries, "optimizer": optimizer}


def differences(a, b, path=""):
    """Paths where `a` and `b` differ (dicts by key, Tensors by layout and bytes)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}/{k}: only in one" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += differences(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return [] if a.key() == b.key() else [f"{path}: {a} differs"]
    if isinstance(a, str) and isinstance(b, str) and a != b:
        at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return [f"{path}: from character {at}: {a[at:at + 40]!r} != {b[at:at + 40]!r}"]
    return [] if type(a) is type(b) and a == b else [f"{path}: {a!r:.60} != {b!r:.60}"]


def main(argv):
    if len(argv) == 3 and argv[1] == "check":
        try:
            print(f"step {read(argv[2])['step']}")
            return 0
        except CheckpointError as e:
            print(f"soak_checkpoint: {argv[2]}: {e}", file=sys.stderr)
            return 1
    if len(argv) == 4 and argv[1] == "compare":
        try:
            diff = differences(normalized(read(argv[2])), normalized(read(argv[3])))
        except CheckpointError as e:
            print(f"soak_checkpoint: {e}", file=sys.stderr)
            return 2
        if diff:
            print(f"soak_checkpoint: {argv[2]} and {argv[3]} differ in {len(diff)} places:", file=sys.stderr)
            for d in diff[:10]:
                print(f"  {d}", file=sys.stderr)
            return 1
        print("bit-exact")
        return 0
    print("usage: soak_checkpoint.py check PATH | compare A B", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
