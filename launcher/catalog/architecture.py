"""A model's resolved dimensions and what follows from them: parameter counts and FLOPs.

Counts follow the Hugging Face implementations of each architecture (untied input and output
embeddings, no biases for Llama/Mistral/Mixtral; biased projections and LayerNorms for GPT-NeoX).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

MODEL_TYPES = ("llama", "mistral", "mixtral", "gpt_neox")

# The transformers classes the entry script instantiates, per architecture type.
HF_CLASSES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", "LlamaDecoderLayer"),
    "mistral": ("MistralConfig", "MistralForCausalLM", "MistralDecoderLayer"),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", "MixtralDecoderLayer"),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", "GPTNeoXLayer"),
}


@dataclass(frozen=True)
class Architecture:
    type: str
    num_layers: int
    hidden_width: int
    num_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    num_experts: int = 1
    num_experts_per_tok: int = 1

    @property
    def head_dim(self) -> int:
        return self.hidden_width // self.num_heads

    def _attention(self) -> int:
        h, kv = self.hidden_width, self.num_key_value_heads * self.head_dim
        if self.type == "gpt_neox":
            return 3 * h * h + 3 * h + h * h + h  # fused QKV and dense, both biased
        return h * h + 2 * h * kv + h * h        # q, k, v, o without bias

    def _mlp(self, experts: int) -> int:
        h, i = self.hidden_width, self.intermediate_size
        if self.type == "gpt_neox":
            return h * i + i + i * h + h         # two biased projections, GELU
        router = h * self.num_experts if self.type == "mixtral" else 0
        return experts * 3 * h * i + router      # SwiGLU: gate, up, down

    def _norms(self) -> int:
        return 4 * self.hidden_width if self.type == "gpt_neox" else 2 * self.hidden_width

    def _final_norm(self) -> int:
        return 2 * self.hidden_width if self.type == "gpt_neox" else self.hidden_width

    def layer_parameters(self, experts: int | None = None) -> int:
        n = self.num_experts if experts is None else experts
        return self._attention() + self._mlp(n) + self._norms()

    @property
    def embedding_parameters(self) -> int:
        return 2 * self.vocab_size * self.hidden_width  # input embedding + untied LM head

    @property
    def parameters(self) -> int:
        return (self.num_layers * self.layer_parameters() + self.embedding_parameters
                + self._final_norm())

    @property
    def active_parameters(self) -> int:
        """Parameters one token passes through (all of them, except unused MoE experts)."""
        return (self.num_layers * self.layer_parameters(self.num_experts_per_tok)
                + self.embedding_parameters + self._final_norm())

    def flops_per_token(self, seq_length: int) -> float:
        """Training FLOPs per token: 6 x active parameters plus attention scores (Kaplan et al. 2020;
        Narayanan et al. 2021), the figure the progress line divides by to report TFLOPs."""
        return 6.0 * self.active_parameters + 12.0 * self.num_layers * self.hidden_width * seq_length

    def as_dict(self) -> dict:
        d = asdict(self)
        d["parameters"] = self.parameters
        d["active_parameters"] = self.active_parameters
        return d
