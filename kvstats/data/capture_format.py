"""The capture file format, in one place: what the writer stores and every reader expects.

A capture is an uncompressed ``.npz`` (:func:`numpy.savez`) with four arrays:

=========  ==========================================  =====================================
name       shape                                       content
=========  ==========================================  =====================================
``K``      ``(n_texts, n_layers, n_kv_heads, N, d)``   post-RoPE keys as the KV cache stores them
``V``      ``(n_texts, n_layers, n_kv_heads, N, d)``   values
``q``      ``(n_texts, n_layers, n_q_heads, N, d)``    post-RoPE queries; ``n_q_heads`` a
                                                       multiple of ``n_kv_heads`` (query head
                                                       ``h`` reads KV head ``h // group``)
``meta``   ``()``                                      a JSON string (model, texts, token ids, ...)
=========  ==========================================  =====================================

Which model layers a capture holds: ``meta["layers"]``, the model layer of each stored
slot (slot ``i`` of axis 1 holds model layer ``meta["layers"][i]``), written when only
some layers were captured (``capture(..., layers=...)``). A file without it holds every
layer in order (slot ``i`` is model layer ``i``), as every capture did before.
Selections name model layers; :func:`layer_slots` turns them into stored slots.

``meta["format"]`` is the format's version, :data:`FORMAT_VERSION` (1: the layout above).
:func:`kvstats.models.capture` records it; a file without it (every capture before it was
recorded, or a hand-written one) is version 1. Readers refuse another version, and a
``meta["post_rope"]`` other than true: the format holds keys and queries *after* RoPE
(what the cache stores; the trials' attention ``softmax(q·k/√d)`` needs the rotated
ones). ``K``, ``V`` and ``q`` are float16, float32 or float64 (:func:`kvstats.models.capture`
writes float32); any other dtype is refused.

``meta["env"]`` (written by :func:`kvstats.models.capture` since 2026-12-04; absent in
older files, which read as before) records what shapes the floats' last bits: the CPU,
torch's CPU kernels and threads, numpy's BLAS, the attention implementation, versions,
the kvstats revision and the batch size (:func:`kvstats.models.kv_capture.capture_env`).
No reader needs it. Since it is in ``meta``, it is in the content fingerprint, not in
the arrays fingerprint (:class:`CaptureHeader`).

The writer is :meth:`kvstats.models.kv_capture.Capture.save`, the readers
:func:`kvstats.data.real.load_trials` (the arrays, memory-mapped: it maps only the
layers, heads and query position it selects, after one streamed CRC-32 check of the
file per process, ``verify=True``) and the sweep's real data source
(:func:`read_header`: shapes, a content fingerprint and an arrays-only one from the zip
directory and the array headers, without reading the data; :func:`read_layers`: the model layers held).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float

from kvstats._checks import _describe

__all__ = ["ARRAYS", "LAYERS", "FORMAT", "FORMAT_VERSION", "CaptureHeader", "write_capture",
           "read_capture", "read_header", "read_layers", "held_layers", "layer_slots", "check_shapes",
           "check_meta"]

#: The arrays of a capture file, in the order they are written.
ARRAYS = ("K", "V", "q", "meta")
_DATA = ("K", "V", "q")
#: The meta key listing the model layer of each stored slot (absent: every layer, in order).
LAYERS = "layers"
#: The meta key holding the format's version (absent: version 1, every file before it was recorded).
FORMAT = "format"
#: The version this module writes and reads.
FORMAT_VERSION = 1
#: The array dtypes a capture may hold (numpy promotes anything else to float64 or refuses it).
_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class CaptureHeader:
    """What a capture holds, read from its zip directory and array headers.

    ``fingerprint`` identifies the content: 16 hex digits of the SHA-256 of the CRC-32s
    and sizes the ``.npz`` stores for its arrays, ``meta`` included (two files with equal
    arrays and meta have equal fingerprints, whatever their paths); the sweep's cell keys
    hold it. ``arrays_fingerprint`` is the same over ``K``, ``V`` and ``q`` alone (their
    CRC-32s, sizes and shapes): equal for two captures with the same floats whatever their
    ``meta`` records (another machine, version or revision), so that of two captures whose
    ``fingerprint`` differs it tells whether the floats differ or only the records. None
    for a header built by hand.
    """

    n_texts: int
    n_layers: int
    n_kv_heads: int
    n_keys: int
    dim: int
    n_q_heads: int
    fingerprint: str
    arrays_fingerprint: str | None = None


def write_capture(path: str | os.PathLike,
                  K: Float[np.ndarray, "texts layers kv_heads n d"],
                  V: Float[np.ndarray, "texts layers kv_heads n d"],
                  q: Float[np.ndarray, "texts layers q_heads n d"],
                  meta: dict[str, Any]) -> None:
    """Write a capture file (arrays as given; ``meta`` as a JSON string).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "cap.npz")
    >>> z = np.zeros((1, 2, 1, 4, 8), np.float32)
    >>> write_capture(p, z, z, np.zeros((1, 2, 3, 4, 8), np.float32), {"model": "toy"})
    >>> read_header(p).n_q_heads, sorted(np.load(p).files)
    (3, ['K', 'V', 'meta', 'q'])

    ``meta["layers"]``, when given, must name one model layer per stored slot:

    >>> write_capture(p, z, z, np.zeros((1, 2, 3, 4, 8), np.float32), {"layers": [0, 15]})
    >>> read_layers(p)
    (0, 15)
    """
    # refuse here what read_capture would refuse, before a file is written
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict (stored as a JSON object); received {_describe(meta)}")
    check_shapes(np.shape(K), np.shape(V), np.shape(q), "capture", "the capture being written")
    _check_dtypes(K, V, q, "the capture being written")
    check_meta(meta, "meta", "the capture being written")
    held_layers(meta, np.shape(K)[1], "meta", "K")
    try:
        text = json.dumps(meta)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"meta must hold only JSON values (str, int, float, bool, None, lists, "
                        f"dicts); received {_describe(meta)}: {exc}") from None
    np.savez(path, K=K, V=V, q=q, meta=np.array(text))


def check_shapes(K: tuple[int, ...], V: tuple[int, ...], q: tuple[int, ...], name: str,
                 where: str) -> None:
    """Raise ValueError unless the shapes of ``K``, ``V``, ``q`` are those of a capture.

    ``name`` starts the message (e.g. ``"capture"``), ``where`` says which file.

    Examples
    --------
    >>> check_shapes((1, 2, 1, 4, 8), (1, 2, 1, 4, 8), (1, 2, 3, 4, 8), "capture", "'c.npz'")
    >>> check_shapes((1, 2, 2, 4, 8), (1, 2, 2, 4, 8), (1, 2, 3, 4, 8), "capture", "'c.npz'")
    Traceback (most recent call last):
    ...
    ValueError: capture q must have shape (n_texts, n_layers, n_q_heads, N, d) with n_q_heads a multiple of n_kv_heads=2; 'c.npz' holds q (1, 2, 3, 4, 8), K (1, 2, 2, 4, 8)
    """
    K, V, q = tuple(K), tuple(V), tuple(q)
    if len(K) != 5 or V != K or min(K) < 1:
        raise ValueError(f"{name} K and V must both have shape (n_texts, n_layers, n_kv_heads, N, d), "
                         f"none empty; {where} holds K {K}, V {V}, q {q}")
    if len(q) != 5 or q[:2] != K[:2] or q[3:] != K[3:] or q[2] % K[2]:
        raise ValueError(f"{name} q must have shape (n_texts, n_layers, n_q_heads, N, d) with n_q_heads "
                         f"a multiple of n_kv_heads={K[2]}; {where} holds q {q}, K {K}")


def _check_dtypes(K: Any, V: Any, q: Any, where: str) -> None:
    """Refuse arrays whose dtype is not float16, float32 or float64 (an int8 or complex capture
    would have become float64 trials, twice a float32 selection's memory, or worse)."""
    bad = {n: str(np.asarray(a).dtype) for n, a in (("K", K), ("V", V), ("q", q))
           if np.asarray(a).dtype.newbyteorder("=") not in _DTYPES}
    if bad:
        raise ValueError(f"capture arrays must be float16, float32 or float64; {where} holds {bad}")


def check_meta(meta: dict[str, Any], name: str, where: str) -> None:
    """Refuse a capture ``meta`` of another format version or with ``post_rope`` not true.

    ``meta["format"]`` absent is version 1 (files written before it was recorded); so is
    ``meta["post_rope"]`` absent (post-RoPE, the only layout the format has). ``name`` and
    ``where`` say in errors which argument and file.

    Examples
    --------
    >>> from kvstats.data.capture_format import check_meta
    >>> check_meta({"format": 1, "post_rope": True}, "meta", "'c.npz'")
    >>> check_meta({"model": "toy"}, "meta", "'c.npz'")         # an older file: version 1
    >>> check_meta({"post_rope": False}, "meta", "'c.npz'")
    Traceback (most recent call last):
    ...
    ValueError: meta 'post_rope' must be true (a capture holds keys and queries after RoPE, as the cache stores them and the trials' attention needs them); 'c.npz' records False
    """
    version = meta.get(FORMAT, FORMAT_VERSION)
    if isinstance(version, bool) or version != FORMAT_VERSION:
        raise ValueError(f"{name} {FORMAT!r} must be {FORMAT_VERSION} (the capture format this kvstats "
                         f"reads; absent means {FORMAT_VERSION}); {where} records {version!r}: written "
                         f"by another kvstats version, upgrade kvstats to read it")
    post_rope = meta.get("post_rope", True)
    if post_rope is not True:
        raise ValueError(f"{name} 'post_rope' must be true (a capture holds keys and queries after "
                         f"RoPE, as the cache stores them and the trials' attention needs them); "
                         f"{where} records {post_rope!r}")


def _missing(stored: set[str], name: str, path: str | os.PathLike) -> None:
    missing = sorted(set(ARRAYS) - stored)
    if missing:
        raise ValueError(f"{name} must be a capture file with arrays K, V, q, meta; "
                         f"{os.fspath(path)!r} lacks {missing}")


def _parse_meta(text: str, name: str, path: str | os.PathLike) -> dict[str, Any]:
    """A capture's meta string as the JSON object it must be, of this format version
    (:func:`check_meta`)."""
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        meta = exc
    if not isinstance(meta, dict):
        raise ValueError(f"{name} must be a capture whose meta is a JSON object; "
                         f"{os.fspath(path)!r} holds " + (f"no valid JSON ({meta})"
                                                          if isinstance(meta, Exception)
                                                          else f"a JSON {type(meta).__name__}"))
    check_meta(meta, f"{name}'s meta", repr(os.fspath(path)))
    return meta


def held_layers(meta: Any, n_layers: int, name: str, where: str) -> tuple[int, ...]:
    """The model layer of each of a capture's ``n_layers`` stored slots.

    ``meta["layers"]`` when recorded (checked: one distinct non-negative int per slot),
    else every layer in order (a capture of all layers; every file before layer
    selection). ``name`` and ``where`` say in errors which argument and file.

    Examples
    --------
    >>> held_layers({"model": "toy"}, 3, "meta", "'c.npz'")
    (0, 1, 2)
    >>> held_layers({"layers": [0, 15, 29]}, 3, "meta", "'c.npz'")
    (0, 15, 29)
    >>> held_layers({"layers": [0, 15]}, 3, "meta", "'c.npz'")
    Traceback (most recent call last):
    ...
    ValueError: meta 'layers' must list the model layer of each of the 3 stored layers of 'c.npz' (distinct non-negative ints); received [0, 15]
    """
    if not isinstance(meta, dict) or LAYERS not in meta:
        return tuple(range(n_layers))
    value = meta[LAYERS]
    ok = (isinstance(value, (list, tuple)) and len(value) == n_layers
          and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value)
          and len(set(value)) == n_layers)
    if not ok:
        raise ValueError(f"{name} {LAYERS!r} must list the model layer of each of the {n_layers} stored "
                         f"layers of {where} (distinct non-negative ints); received {value!r}")
    return tuple(value)


def layer_slots(held: tuple[int, ...], layer: int | list[int] | None, name: str, where: str) -> list[int]:
    """The stored slots of model layers ``layer`` (an int, a list, or None: every layer held).

    ``held`` is :func:`held_layers`' answer; ``name`` and ``where`` (the file) say in
    errors which argument and capture. A layer the capture does not hold is a ValueError
    listing the layers it holds (their range when it holds ``0 .. L-1``).

    Examples
    --------
    >>> layer_slots((0, 15, 29), [29, 15], "layer", "'c.npz'")
    [2, 1]
    >>> layer_slots((0, 1, 2), 2, "layer", "'c.npz'")
    [2]
    >>> layer_slots((0, 15, 29), 16, "layer", "'c.npz'")
    Traceback (most recent call last):
    ...
    ValueError: layer must be among the model layers [0, 15, 29] (the capture 'c.npz' holds only these); received 16
    """
    if layer is None:
        return list(range(len(held)))
    wanted = [layer] if isinstance(layer, int) else list(layer)
    slot = {model_layer: i for i, model_layer in enumerate(held)}
    if any(i not in slot for i in wanted):
        allowed = (f"in [0, {len(held) - 1}] (the capture {where} has {len(held)} layers)"
                   if held == tuple(range(len(held))) else
                   f"among the model layers {list(held)} (the capture {where} holds only these)")
        raise ValueError(f"{name} must be {allowed}; received {layer!r}")
    return [slot[i] for i in wanted]


def _npy_header(fh: Any) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` of the ``.npy`` stream ``fh``, left at its data."""
    version = np.lib.format.read_magic(fh)
    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
            else np.lib.format.read_array_header_2_0)
    return read(fh)


def _map_member(zf: zipfile.ZipFile, array: str) -> np.memmap | None:
    """Array ``array`` of the ``.npz`` as a read-only memory map of the file, or None where
    it is not stored plainly (compressed: ``numpy.savez_compressed``; an object array;
    an empty one): a stored member's bytes are the ``.npy`` file itself, after the zip's
    local header (whose name and extra fields say its length)."""
    info = zf.getinfo(f"{array}.npy")
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 1:   # compressed, encrypted
        return None
    with zf.open(info) as fh:
        shape, fortran, dtype = _npy_header(fh)
        header = fh.tell()
    if dtype.hasobject or 0 in shape:
        return None   # np.load refuses the first, and maps nothing for the second
    # the open handle, not the path: the maps show the file that was opened and CRC-checked
    # even if another is put at the path meanwhile (pread leaves zipfile's position alone)
    local = os.pread(zf.fp.fileno(), 30, info.header_offset)
    if local[:4] != b"PK\x03\x04":
        return None
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return np.memmap(zf.fp, dtype=dtype, mode="r", shape=shape, order="F" if fortran else "C",
                     offset=info.header_offset + 30 + name_len + extra_len + header)


#: Captures whose mapped members passed their CRC-32 in this process: (device, inode, size,
#: mtime, ctime, the zip directory's CRC-32s) of the open file -> True. Any write changes
#: the ctime, which no utime (cp -p, rsync -t, shutil.copy2) can set back, so a file
#: rewritten in place is checked again; only passes are kept (a corrupted file fails each time).
_VERIFIED: dict[tuple, bool] = {}
_VERIFY_CHUNK = 1 << 16   # bytes per read: the check's memory, whatever the file's size


def _verify_members(zf: zipfile.ZipFile, members: list[str]) -> None:
    """Check the zip CRC-32 of ``members`` (mapped arrays, whose bytes numpy never reads
    through the zip) by streaming each once, in chunks of bounded size; a pass is cached per
    file version (:data:`_VERIFIED`). A mismatch raises :class:`zipfile.BadZipFile`
    ("Bad CRC-32 for file 'K.npy'"), as zipfile does when it reads a member to its end."""
    st = os.fstat(zf.fp.fileno())   # the file read below, whatever is at ``path`` now
    infos = [zf.getinfo(m) for m in members]
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
           tuple((i.filename, i.CRC, i.file_size) for i in infos))
    if key in _VERIFIED:
        return
    for info in infos:
        with zf.open(info) as fh:
            while fh.read(_VERIFY_CHUNK):   # zipfile compares the CRC-32 at the member's end
                pass
    if len(_VERIFIED) >= 1024:              # a long-lived process reading many files: bounded
        _VERIFIED.clear()
    _VERIFIED[key] = True


def read_capture(path: str | os.PathLike, name: str = "path", *, mapped: bool = False,
                 verify: bool = True) -> tuple[Float[np.ndarray, "texts layers kv_heads n d"],
                            Float[np.ndarray, "texts layers kv_heads n d"],
                            Float[np.ndarray, "texts layers q_heads n d"], dict[str, Any]]:
    """Read and check a capture file; return ``(K, V, q, meta)`` as stored, in native
    byte order (a big-endian ``>f4`` file gives float32, not a float64 copy).

    ``name`` is how error messages call the file argument. ``mapped=True`` returns
    ``K``, ``V``, ``q`` as read-only memory maps of the file (:class:`numpy.memmap`)
    where it stores them uncompressed (as :func:`write_capture` does), so that only what
    is indexed is read: a selection of layers and heads reads those alone
    (:func:`kvstats.data.real.load_trials`). Mapped arrays keep the file's byte order; a
    compressed array is read whole, as without ``mapped``.

    ``verify`` (mapped reads only; an unmapped read always checks it): check the zip
    CRC-32 of the mapped arrays, so that a corrupted file is refused as an unmapped read
    refuses it, rather than giving finite garbage. It reads the whole file once, streamed
    in 64 KiB chunks (memory bounded, time that of reading the file: about a second per
    GB from a warm page cache), and once per process for each version of the file (its
    device, inode, size, modification and change times and stored CRC-32s, from the open
    file): a sweep that reads a capture cell by cell pays it once. ``verify=False`` skips
    it (only the selection is read); ``verify`` must be a bool (numpy's too), else
    ``ValueError``.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "cap.npz")
    >>> z = np.zeros((1, 2, 1, 4, 8), np.float32)
    >>> write_capture(p, z, z, np.zeros((1, 2, 3, 4, 8), np.float32), {"model": "toy"})
    >>> read_capture(p)[3]
    {'model': 'toy'}
    >>> type(read_capture(p, mapped=True)[0]).__name__
    'memmap'
    """
    # not an .npz, a pickled (object) array, a truncated or empty file (EOFError): numpy's
    # error, named; a plain .npy loads as an array, not an archive: refused the same way
    try:
        data = np.load(path, mmap_mode="r", allow_pickle=False)  # a large .npy: mapped, not read
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ValueError(f"{name} must be a capture .npz written by kvstats.models.capture; "
                         f"{os.fspath(path)!r} could not be read: {exc}") from exc
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{name} must be a capture .npz written by kvstats.models.capture; "
                         f"{os.fspath(path)!r} could not be read: it is a single .npy array "
                         f"({_describe(data)}), not an .npz archive")
    if not isinstance(verify, (bool, np.bool_)):   # a flag read from an array or config
        raise ValueError(f"verify must be True or False; received {_describe(verify)}")
    try:
        with data:
            arrays = {}
            for array in (a for a in ARRAYS if a in data.files):
                view = _map_member(data.zip, array) if mapped and array in _DATA else None
                arrays[array] = data[array] if view is None else view
            if verify:   # the mapped members: np.load read the others whole, checking them
                _verify_members(data.zip, [f"{a}.npy" for a, v in arrays.items()
                                           if isinstance(v, np.memmap)])
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ValueError(f"{name} must be a capture .npz written by kvstats.models.capture; "
                         f"{os.fspath(path)!r} could not be read: {exc}") from exc
    _missing(set(arrays), name, path)
    # a file written on a big-endian machine: same values and width, native order (the
    # readers' float32 check would otherwise widen '>f4' to float64); a map stays as stored
    K, V, q = (a if a.dtype.isnative or isinstance(a, np.memmap)
               else a.astype(a.dtype.newbyteorder("="))
               for a in (arrays["K"], arrays["V"], arrays["q"]))
    meta = _parse_meta(str(arrays["meta"]), name, path)
    check_shapes(K.shape, V.shape, q.shape, "capture", repr(os.fspath(path)))
    _check_dtypes(K, V, q, repr(os.fspath(path)))
    held_layers(meta, K.shape[1], f"{name}'s meta", repr(os.fspath(path)))
    return K, V, q, meta


def read_header(path: str | os.PathLike, name: str = "path") -> CaptureHeader:
    """Shapes, content fingerprint and arrays fingerprint of a capture (:class:`CaptureHeader`),
    from its zip directory and array headers.

    Reads no array data, so it is fast on a large file; an old capture (its ``meta``
    without the records of later versions) has both fingerprints too. ``name`` is how error messages
    call the file argument.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from kvstats.data.capture_format import read_header, write_capture
    >>> p = os.path.join(tempfile.mkdtemp(), "cap.npz")
    >>> z = np.zeros((2, 3, 1, 4, 8), np.float32)
    >>> write_capture(p, z, z, np.zeros((2, 3, 3, 4, 8), np.float32), {})
    >>> h = read_header(p)
    >>> h.n_texts, h.n_layers, h.n_kv_heads, h.n_keys, h.dim, h.n_q_heads, len(h.fingerprint)
    (2, 3, 1, 4, 8, 3, 16)

    Another ``meta`` changes the content fingerprint, not the arrays':

    >>> write_capture(p, z, z, np.zeros((2, 3, 3, 4, 8), np.float32), {"model": "toy"})
    >>> h2 = read_header(p)
    >>> h2.fingerprint == h.fingerprint, h2.arrays_fingerprint == h.arrays_fingerprint
    (False, True)
    """
    try:
        with zipfile.ZipFile(path) as zf:
            members = {info.filename: info for info in zf.infolist()}
            shapes = {}
            for array in _DATA:
                if f"{array}.npy" not in members:
                    continue
                with zf.open(f"{array}.npy") as fh:
                    shapes[array] = _npy_header(fh)[0]
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ValueError(f"{name} must be a capture .npz written by kvstats.models.capture; "
                         f"{os.fspath(path)!r} could not be read: {exc}") from exc
    _missing({m[:-4] for m in members if m.endswith(".npy")}, name, path)
    K, V, q = shapes["K"], shapes["V"], shapes["q"]
    check_shapes(K, V, q, "capture", repr(os.fspath(path)))
    # The CRC-32 of every stored array (written by zipfile, read from the central directory
    # without touching the data) identifies the content.
    crcs = sorted((n, m.CRC, m.file_size) for n, m in members.items())
    # K, V, q alone (their .npy bytes hold their headers, so the shapes too; named anyway):
    # the floats, whatever meta records
    arrays = [(f"{a}.npy", members[f"{a}.npy"].CRC, members[f"{a}.npy"].file_size, list(shapes[a]))
              for a in _DATA]
    return CaptureHeader(K[0], K[1], K[2], K[3], K[4], q[2], _digest(crcs), _digest(arrays))


def _digest(rows: list) -> str:
    """16 hex digits of the SHA-256 of ``rows`` as compact JSON."""
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_layers(path: str | os.PathLike, name: str = "path") -> tuple[int, ...]:
    """The model layer of each stored slot of a capture (:func:`held_layers`), reading
    only the array headers and ``meta`` (not the data). ``name`` is how error messages
    call the file argument.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "cap.npz")
    >>> z = np.zeros((1, 2, 1, 4, 8), np.float32)
    >>> write_capture(p, z, z, np.zeros((1, 2, 3, 4, 8), np.float32), {"layers": [3, 7]})
    >>> read_layers(p)
    (3, 7)
    >>> write_capture(p, z, z, np.zeros((1, 2, 3, 4, 8), np.float32), {})   # every layer
    >>> read_layers(p)
    (0, 1)
    """
    n_layers = read_header(path, name).n_layers
    try:
        with zipfile.ZipFile(path) as zf, zf.open("meta.npy") as fh:
            text = str(np.lib.format.read_array(fh, allow_pickle=False))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ValueError(f"{name} must be a capture .npz written by kvstats.models.capture; "
                         f"{os.fspath(path)!r} could not be read: {exc}") from exc
    return held_layers(_parse_meta(text, name, path), n_layers, f"{name}'s meta", repr(os.fspath(path)))
