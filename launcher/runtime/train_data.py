"""Training batches, addressed by step so that a resumed job sees exactly the batches it would have.

A batch is a function of (seed, data-parallel rank, step): no iterator state to checkpoint, and a
restart after a spot interruption continues the same sequence of batches.
"""
import glob
import hashlib
import json
import os
import tempfile

import numpy as np
import torch


class SyntheticBatches:
    """Random starting tokens followed by a learnable rule (each token is the previous plus one)."""

    def __init__(self, vocab_size, seq_length, batch_size, seed, dp_rank):
        self.vocab_size, self.seq_length, self.batch_size = vocab_size, seq_length, batch_size
        self.seed, self.dp_rank = seed, dp_rank

    def batch(self, step):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.dp_rank * 7919 + step)
        start = torch.randint(0, self.vocab_size, (self.batch_size, 1), generator=g)
        return (start + torch.arange(self.seq_length)) % self.vocab_size


class TokenFileBatches:
    """Fixed-length sequences cut from token-id files in a channel: `*.jsonl` lines of
    {"input_ids": [...]} or `*.npy` integer arrays (1-D streams or 2-D rows).

    The files are one virtual stream that a rank reads row by row: it holds only the rows of its own
    batches, so its memory stays flat however large the corpus is (AWS's SMP v2 data pipelines hold one
    file at a time; Megatron's indexed datasets map theirs). JSON lines are converted once per host into an
    int32 token cache (`prepare`); .npy files are read where their header says the array starts. Rows are
    shuffled per epoch by a keyed permutation computed row by row, never materialised."""

    def __init__(self, directory, data_format, seq_length, batch_size, seed, dp_rank, dp_size, cache_dir=None):
        self.stream = TokenStream(token_files(directory, data_format, cache_dir))
        rows = self.stream.size // seq_length
        if rows < batch_size * dp_size:
            raise ValueError(f"{directory} holds {self.stream.size} tokens: fewer than one global batch of "
                             f"{batch_size * dp_size} sequences of {seq_length}")
        self.rows, self.seq_length = rows, seq_length
        self.batch_size, self.seed, self.dp_rank, self.dp_size = batch_size, seed, dp_rank, dp_size
        self.per_epoch = rows // (batch_size * dp_size)

    def batch(self, step):
        epoch, index = divmod(step - 1, self.per_epoch)
        first = (index * self.dp_size + self.dp_rank) * self.batch_size
        key = (self.seed * 1_000_003 + epoch) & _MASK64
        picked = [permuted(first + i, self.rows, key) for i in range(self.batch_size)]
        return torch.from_numpy(np.stack([self.stream.read(r * self.seq_length, self.seq_length) for r in picked]))


class TokenFile:
    """A 1-D run of token ids in a file: where they start, their dtype and how many there are."""

    def __init__(self, path, offset, dtype, size):
        self.path, self.offset, self.dtype, self.size = path, offset, np.dtype(dtype), size

    def read(self, start, count):
        """Tokens [start, start + count), read with one positioned read (the page cache holds the file, the
        process only the row)."""
        nbytes = count * self.dtype.itemsize
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, nbytes, self.offset + start * self.dtype.itemsize)
        finally:
            os.close(fd)
        if len(data) != nbytes:
            raise ValueError(f"{self.path}: shorter than its header says ({len(data)} of {nbytes} bytes at "
                             f"token {start})")
        return np.frombuffer(data, dtype=self.dtype)


class TokenStream:
    """Token files read as one stream: `read` copies only the span asked for, from one or two files."""

    def __init__(self, files):
        self.files = [f for f in files if f.size]
        self.starts = np.cumsum([0] + [f.size for f in self.files])
        self.size = int(self.starts[-1])

    def read(self, start, length):
        out = np.empty(length, dtype=np.int64)
        i = int(np.searchsorted(self.starts, start, side="right")) - 1
        done = 0
        while done < length:
            offset = start + done - int(self.starts[i])
            take = min(length - done, self.files[i].size - offset)
            out[done: done + take] = self.files[i].read(offset, take)
            done, i = done + take, i + 1
        return out


def _files(directory, data_format):
    pattern = "*.jsonl" if data_format == "jsonl" else "*.npy"
    files = sorted(glob.glob(os.path.join(directory, "**", pattern), recursive=True))
    if not files:
        raise FileNotFoundError(f"no {pattern} files under {directory}")
    return files


def default_cache_dir():
    return os.environ.get("SMP_LAUNCH_TOKEN_CACHE") or os.path.join(tempfile.gettempdir(), "smp-launch-tokens")


def _npy_file(path):
    """A .npy file's token run from its header alone: nothing of the array is read."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(f)
        offset = f.tell()
    if not np.issubdtype(dtype, np.integer):
        raise ValueError(f"{path}: token ids must be integers, not {dtype}")
    if fortran and len(shape) > 1:
        raise ValueError(f"{path}: save it in C order (np.ascontiguousarray) so its rows read without a copy")
    return TokenFile(path, offset, dtype, int(np.prod(shape, dtype=np.int64)))


def token_files(directory, data_format, cache_dir=None):
    """Every token file of the channel, in file-name order, as 1-D token runs read on demand."""
    if data_format == "jsonl":
        return [TokenFile(path, 0, CACHE_DTYPE, os.path.getsize(path) // np.dtype(CACHE_DTYPE).itemsize)
                for path in prepare(directory, data_format, cache_dir)]
    return [_npy_file(path) for path in _files(directory, data_format)]


CACHE_DTYPE = np.int32
_CHUNK = 1 << 16  # tokens per write while converting (512 KiB as int64)


def prepare(directory, data_format, cache_dir=None):
    """Convert each JSON-lines file once into a raw int32 token file (line by line, so memory stays flat)
    under cache_dir, keyed by the file's path, size and time; return the cache files in order. Rank 0 of
    each host runs it before the others open the channel; .npy channels need nothing."""
    if data_format != "jsonl":
        return []
    cache_dir = cache_dir or default_cache_dir()
    os.makedirs(cache_dir, exist_ok=True)
    out = []
    for path in _files(directory, data_format):
        info = os.stat(path)
        key = hashlib.sha256(f"{os.path.abspath(path)}|{info.st_size}|{info.st_mtime_ns}".encode()).hexdigest()[:24]
        cached = os.path.join(cache_dir, f"{key}.tokens")
        if not os.path.exists(cached):
            _convert(path, cached)
        out.append(cached)
    return out


def _convert(path, cached):
    tmp = f"{cached}.{os.getpid()}.tmp"
    pending, count = [], 0
    with open(path, encoding="utf-8") as f, open(tmp, "wb") as sink:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            ids = json.loads(line).get("input_ids")
            if not isinstance(ids, list):
                raise ValueError(f"{path}:{number}: expected an object with an input_ids list")
            pending.append(np.asarray(ids, dtype=np.int64))
            count += len(ids)
            if count >= _CHUNK:
                _write(sink, pending, path)
                pending, count = [], 0
        _write(sink, pending, path)
    os.replace(tmp, cached)


def _write(sink, parts, path):
    if not parts:
        return
    tokens = np.concatenate(parts)
    if tokens.size and (tokens.min() < 0 or tokens.max() > np.iinfo(CACHE_DTYPE).max):
        raise ValueError(f"{path}: token ids must lie between 0 and {np.iinfo(CACHE_DTYPE).max}")
    sink.write(tokens.astype(CACHE_DTYPE).tobytes())


_MASK64 = (1 << 64) - 1


def _mix(x):
    """splitmix64's finaliser: a 64-bit integer hash."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def permuted(index, n, key):
    """Where `index` goes in a keyed pseudo-random permutation of range(n): a four-round Feistel network
    over the next even power of two, re-applied until the value falls inside range(n) (cycle walking).
    A bijection whatever n is, in constant memory: the shuffle never holds a list of n rows."""
    half = max(1, ((n - 1).bit_length() + 1) // 2)
    mask = (1 << half) - 1
    x = index
    while True:
        left, right = x >> half, x & mask
        for round_ in range(4):
            left, right = right, left ^ (_mix(key ^ (round_ << 56) ^ right) & mask)
        x = (left << half) | right
        if x < n:
            return x


def context_parallel_slice(input_ids, cp_size, cp_rank):
    """SMP's load-balanced context-parallel split: 2 x cp chunks, this rank keeps chunk r and 2cp-1-r."""
    if cp_size == 1:
        return input_ids
    chunks = input_ids.chunk(2 * cp_size, dim=1)
    return torch.cat((chunks[cp_rank], chunks[2 * cp_size - 1 - cp_rank]), dim=1)
