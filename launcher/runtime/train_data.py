"""Training batches, addressed by step so that a resumed job sees exactly the batches it would have.

A batch is a function of (seed, data-parallel rank, step): no iterator state to checkpoint, and a
restart after a spot interruption continues the same sequence of batches.
"""
import glob
import json
import os

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
    {"input_ids": [...]} or `*.npy` integer arrays (1-D streams or 2-D rows)."""

    def __init__(self, directory, data_format, seq_length, batch_size, seed, dp_rank, dp_size):
        stream = load_tokens(directory, data_format)
        rows = stream.size // seq_length
        if rows < batch_size * dp_size:
            raise ValueError(f"{directory} holds {stream.size} tokens: fewer than one global batch of "
                             f"{batch_size * dp_size} sequences of {seq_length}")
        self.rows = torch.from_numpy(stream[: rows * seq_length].reshape(rows, seq_length).astype(np.int64))
        self.batch_size, self.seed, self.dp_rank, self.dp_size = batch_size, seed, dp_rank, dp_size
        self.per_epoch = rows // (batch_size * dp_size)

    def batch(self, step):
        epoch, index = divmod(step - 1, self.per_epoch)
        order = torch.randperm(len(self.rows), generator=torch.Generator().manual_seed(self.seed + epoch))
        first = (index * self.dp_size + self.dp_rank) * self.batch_size
        return self.rows[order[first: first + self.batch_size]]


def load_tokens(directory, data_format):
    """Every token in the channel's files, in file-name order, as one int64 stream."""
    pattern = "*.jsonl" if data_format == "jsonl" else "*.npy"
    files = sorted(glob.glob(os.path.join(directory, "**", pattern), recursive=True))
    if not files:
        raise FileNotFoundError(f"no {pattern} files under {directory}")
    parts = []
    for path in files:
        if data_format == "npy":
            parts.append(np.load(path, allow_pickle=False).astype(np.int64).reshape(-1))
            continue
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    ids = json.loads(line).get("input_ids")
                    if not isinstance(ids, list):
                        raise ValueError(f"{path}:{number}: expected an object with an input_ids list")
                    parts.append(np.asarray(ids, dtype=np.int64))
    return np.concatenate(parts)


def context_parallel_slice(input_ids, cp_size, cp_rank):
    """SMP's load-balanced context-parallel split: 2 x cp chunks, this rank keeps chunk r and 2cp-1-r."""
    if cp_size == 1:
        return input_ids
    chunks = input_ids.chunk(2 * cp_size, dim=1)
    return torch.cat((chunks[cp_rank], chunks[2 * cp_size - 1 - cp_rank]), dim=1)
