"""The published points say what their sources say: each row's configuration is consistent with itself.

The step-time model is fitted on these rows (launcher.predict.published), so a mistyped one skews every
prediction a little without any test of the fit noticing. These checks hold for every row of the MPT and
torchtitan tables (MPT_URL, TITAN_A100_URL, TITAN_H100_URL): they catch a slip in a row's sequence length,
cluster size, model shape or layout, not in its throughput, batch or checkpointing, which no rule relates.
"""
import itertools
import re

import pytest

from launcher.predict.published import MPT_POINTS, MPT_SIZES, MPT_VOCAB, TITAN_POINTS, mpt_architecture


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@pytest.mark.parametrize("p", MPT_POINTS + TITAN_POINTS, ids=lambda p: f"{p.label}-{p.gpu}-{p.seq_length}-{p.gpus}")
def test_sequence_lengths_and_gpu_counts_are_the_tables_powers_of_two(p):
    """Both tables sweep sequence lengths and cluster sizes in powers of two, over whole 8-GPU nodes."""
    assert _power_of_two(p.seq_length) and p.seq_length >= 512
    assert _power_of_two(p.gpus) and p.gpus % 8 == 0
    assert p.batch_size >= 1 and p.tokens_per_s_per_gpu > 0


@pytest.mark.parametrize("size", sorted(MPT_SIZES))
def test_mpt_sizes_have_the_head_width_of_their_configs(size):
    """MPT's pretraining configs pair d_model with n_heads at a head width of 64 or 128, and a 4 x d_model MLP."""
    layers, width, heads = MPT_SIZES[size]
    assert width % heads == 0 and width // heads in (64, 128), (width, heads)
    arch = mpt_architecture(size)
    shape = (arch.num_layers, arch.hidden_width, arch.num_heads, arch.num_key_value_heads)
    assert shape == (layers, width, heads, heads)
    assert arch.intermediate_size == 4 * width and arch.vocab_size == MPT_VOCAB


def test_mpt_rows_keep_the_tables_order_and_label_their_size():
    """Each MPT table lists its rows by model size, then sequence length, then GPU count, all descending."""
    order = {size: i for i, size in enumerate(sorted(MPT_SIZES, key=lambda s: MPT_SIZES[s][1] * MPT_SIZES[s][0]))}
    for a, b in itertools.pairwise(MPT_POINTS):
        assert a.label.removeprefix("MPT-") in MPT_SIZES
        if a.source != b.source:
            continue
        ka = (order[a.label.removeprefix("MPT-")], a.seq_length, a.gpus)
        kb = (order[b.label.removeprefix("MPT-")], b.seq_length, b.gpus)
        assert ka >= kb, (a, b)


@pytest.mark.parametrize("p", TITAN_POINTS, ids=lambda p: p.label)
def test_torchtitan_labels_state_the_layout_and_checkpointing_of_their_row(p):
    """A torchtitan label names its parallel layout or GPU count and its activation checkpointing."""
    label = p.label
    if m := re.search(r"FSDP (\d+), CP (\d+)", label):
        assert (int(m[1]) * int(m[2]), p.context_parallel, p.tensor_parallel) == (p.gpus, int(m[2]), 1)
    elif m := re.search(r"FSDP (\d+), TP (\d+)", label):
        assert (int(m[1]) * int(m[2]), p.tensor_parallel, p.context_parallel) == (p.gpus, int(m[2]), 1)
    elif m := re.search(r"FSDP, (\d+) GPUs", label):
        assert (int(m[1]), p.tensor_parallel, p.context_parallel) == (p.gpus, 1, 1)
    else:  # the A100 table: 64 GPUs, FSDP only, named by its checkpointing
        assert (p.gpus, p.tensor_parallel, p.context_parallel) == (64, 1, 1)
        kind = label.rsplit(", ", 1)[1]
        assert p.checkpointing == {"full": 1.0, "selective layer": 0.5, "selective op": 0.0, "none": 0.0}[kind]
    if p.context_parallel > 1 or p.tensor_parallel > 1 or p.precision == "fp8":
        assert p.gpu == "H100 500W"
