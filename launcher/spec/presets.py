"""Named model presets with the published architecture dimensions.

Each entry cites where its dimensions come from and the parameter count its authors publish;
tests hold the count computed from the dimensions to within 2% of that figure.
"""
from __future__ import annotations

from dataclasses import dataclass

from launcher.catalog.architecture import Architecture


@dataclass(frozen=True)
class Preset:
    architecture: Architecture
    published_parameters: float
    max_position_embeddings: int
    rope_theta: float
    source: str
    # Hugging Face's rope_scaling for the model (key, value pairs), None for none.
    rope_scaling: tuple[tuple[str, object], ...] | None = None
    # The first SMP release that supports the model, and the release note that says so; a job on an image with an
    # older release is refused (launcher/rules/checks.py).
    smp_since: str = "2.0.0"
    smp_note: str = ""


# Llama 3.1's rope scaling, as meta-llama/Llama-3.1-8B's and -70B's config.json give it.
LLAMA31_ROPE = (("rope_type", "llama3"), ("factor", 8.0), ("low_freq_factor", 1.0), ("high_freq_factor", 4.0),
                ("original_max_position_embeddings", 8192))
SMP_2_6_LLAMA31 = "SMP 2.6.0 added Llama 3.1 8B and 70B"
SMP_2_3_1_MIXTRAL = "SMP 2.3.1 fixed an out-of-memory error loading Mixtral 8x22B"


def _llama(layers, hidden, heads, kv, inter, vocab, **kw):
    return Architecture("llama", layers, hidden, heads, kv, inter, vocab, **kw)


PRESETS: dict[str, Preset] = {
    "llama2-7b": Preset(_llama(32, 4096, 32, 32, 11008, 32000), 6.74e9, 4096, 10000.0,
                        "meta-llama/Llama-2-7b-hf config.json; 6.74B parameters"),
    "llama2-13b": Preset(_llama(40, 5120, 40, 40, 13824, 32000), 13.0e9, 4096, 10000.0,
                         "meta-llama/Llama-2-13b-hf config.json; 13.0B parameters"),
    "llama2-70b": Preset(_llama(80, 8192, 64, 8, 28672, 32000), 69.0e9, 4096, 10000.0,
                         "meta-llama/Llama-2-70b-hf config.json; 69.0B parameters"),
    # The best practices' 175B reference: GPT-3 175B's depth, width and heads (Brown et al. 2020, table 2.1)
    # in a Llama block, whose SwiGLU MLP width of 8/3 x hidden keeps the count at 175B.
    "llama-175b": Preset(_llama(96, 12288, 96, 96, 32768, 32000), 175.0e9, 4096, 10000.0,
                         "GPT-3 175B: 96 layers, d_model 12288, 96 heads; 175B parameters"),
    "llama3-8b": Preset(_llama(32, 4096, 32, 8, 14336, 128256), 8.03e9, 8192, 500000.0,
                        "meta-llama/Meta-Llama-3-8B config.json; 8.03B parameters"),
    "llama3-70b": Preset(_llama(80, 8192, 64, 8, 28672, 128256), 70.6e9, 8192, 500000.0,
                         "meta-llama/Meta-Llama-3-70B config.json; 70.6B parameters"),
    "llama3.1-8b": Preset(_llama(32, 4096, 32, 8, 14336, 128256), 8.03e9, 131072, 500000.0,
                          "meta-llama/Llama-3.1-8B config.json; 8.03B parameters", rope_scaling=LLAMA31_ROPE,
                          smp_since="2.6.0", smp_note=SMP_2_6_LLAMA31),
    "llama3.1-70b": Preset(_llama(80, 8192, 64, 8, 28672, 128256), 70.6e9, 131072, 500000.0,
                           "meta-llama/Llama-3.1-70B config.json; 70.6B parameters", rope_scaling=LLAMA31_ROPE,
                           smp_since="2.6.0", smp_note=SMP_2_6_LLAMA31),
    "mistral-7b": Preset(Architecture("mistral", 32, 4096, 32, 8, 14336, 32000), 7.24e9, 32768,
                         10000.0, "mistralai/Mistral-7B-v0.1 config.json; 7.24B parameters"),
    "mixtral-8x7b": Preset(Architecture("mixtral", 32, 4096, 32, 8, 14336, 32000, num_experts=8,
                                        num_experts_per_tok=2), 46.7e9, 32768, 1000000.0,
                           "mistralai/Mixtral-8x7B-v0.1 config.json; 46.7B parameters"),
    "mixtral-8x22b": Preset(Architecture("mixtral", 56, 6144, 48, 8, 16384, 32768, num_experts=8,
                                         num_experts_per_tok=2), 141e9, 65536, 1000000.0,
                            "mistralai/Mixtral-8x22B-v0.1 config.json; 141B parameters (39B active), Mistral AI",
                            smp_since="2.3.1", smp_note=SMP_2_3_1_MIXTRAL),
    "gpt-neox-20b": Preset(Architecture("gpt_neox", 44, 6144, 64, 64, 24576, 50432), 20.55e9, 2048,
                           10000.0, "EleutherAI/gpt-neox-20b config.json; 20.55B parameters"),
}
