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

    The files are one virtual stream, memory-mapped: a rank reads only the rows of its own batches, so
    its memory stays flat however large the corpus is (as AWS's SMP v2 data pipelines read a file at a
    time, or Megatron's memory-mapped indexed datasets). JSON lines are converted once per host into a
    token cache beside the others (`prepare`); .npy files are mapped as they are. Rows are shuffled per
    epoch by a keyed permutation computed row by row, never materialised."""

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


class TokenStream:
    """Memory-mapped 1-D token arrays read as one stream: `read` copies only the span asked for."""

    def __init__(self, arrays):
        self.arrays = [a for a in arrays if a.size]
        self.starts = np.cumsum([0] + [a.size for a in self.arrays])
        self.size = int(self.starts[-1])

    def read(self, start, length):
        out = np.empty(length, dtype=np.int64)
        i = int(np.searchsorted(self.starts, start, side="right")) - 1
        done = 0
        while done < length:
            offset = start + done - int(self.starts[i])
            take = min(length - done, self.arrays[i].size - offset)
            out[done: done + take] = self.arrays[i][offset: offset + take]
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


def token_files(directory, data_format, cache_dir=None):
    """Every token file of the channel, in file-name order, as memory-mapped 1-D integer arrays."""
    if data_format == "jsonl":
        return [np.memmap(path, dtype=CACHE_DTYPE, mode="r") if os.path.getsize(path) else np.empty(0, CACHE_DTYPE)
                for path in prepare(directory, data_format, cache_dir)]
    arrays = []
    for path in _files(directory, data_format):
        array = np.load(path, mmap_mode="r", allow_pickle=False)
        if not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"{path}: token ids must be integers, not {array.dtype}")
        if array.ndim > 1 and not array.flags.c_contiguous:
            raise ValueError(f"{path}: save it in C order (np.ascontiguousarray) so its rows map without a copy")
        arrays.append(array.reshape(-1))
    return arrays


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
