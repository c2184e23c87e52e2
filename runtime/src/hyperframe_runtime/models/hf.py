"""Hugging Face causal language models as a :class:`TorchModel`: ``hyperframe_runtime.models.hf:causal_lm``.

Name it as the job's model factory (``entrypoint.module.name``) with its arguments in
``entrypoint.module.args`` (training config ``model_args``):

- ``config``: a ``transformers`` configuration as a JSON object with its ``model_type``
  (``{"model_type": "llama", "hidden_size": 512, ...}``): a model built from it, initialised
  by the model's own ``_init_weights``;
- ``path``: a local directory written by ``save_pretrained`` (``config.json`` and
  ``*.safetensors``): fine-tuning from those weights (read into fp32 parameters). Nothing is downloaded
  (``local_files_only``); each rank reads only its own stages' tensors. With ``config`` too,
  its entries override the saved configuration (dropout, for instance).

Two layouts are supported, which cover most causal LMs of ``transformers``:

- **Llama-style** (``model.embed_tokens``, ``model.layers``, ``model.norm``, ``model.rotary_emb``,
  ``lm_head``: Llama, Mistral, Qwen2 and the like). Every stage keeps the rotary embedding (it
  holds no parameters) and computes the position embeddings and the causal mask itself;
- **GPT-2-style** (``transformer.wte``, ``wpe``, ``h``, ``ln_f``, ``lm_head``).

Samples are whole windows (no padding), so the causal mask is the whole attention mask and the
positions are ``0..seq_len-1`` on every stage. The stage forward calls the decoder layers as the
model's own forward does (hidden states, mask, position ids, Llama's ``position_embeddings``).

Tied embeddings (GPT-2, and any model with ``tie_word_embeddings``): ``lm_head.weight`` is the
token embedding. On one stage they stay one parameter; on different stages the last one holds a
copy, which starts equal (initialised like, or read as, the embedding) and stays equal: the
runtime sums the two copies' gradients every frame (``ModelSpec.tied_parameters``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import torch
import torch.nn.functional as F
from torch import nn

from hyperframe_runtime.models.spec import ModelLoadError
from hyperframe_runtime.models.torch_model import TorchModel

if TYPE_CHECKING:
    from hyperframe_runtime.config import TrainConfig

__all__ = ["CausalLMStages", "causal_lm", "causal_lm_loss"]

_FIELD: Final = "entrypoint.module.args (training config: model_args)"


def causal_lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the micro-batch, in fp32."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


class CausalLMStages(nn.Module):
    """A causal LM's base model and head under their ``transformers`` names (``model.*`` or
    ``transformer.*``, ``lm_head``), with a forward the runtime can cut: on a stage the modules it
    does not hold are identities, and the blocks it does not hold are gone."""

    def __init__(self, lm: nn.Module, base: str) -> None:
        super().__init__()
        self.base_name = base
        self.add_module(base, lm.get_submodule(base))
        self.add_module("lm_head", lm.get_submodule("lm_head"))
        self.config = lm.config

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from transformers.masking_utils import create_causal_mask

        base: Any = getattr(self, self.base_name)
        llama = self.base_name == "model"
        tokens = not x.is_floating_point()  # token ids on the first stage, hidden states after
        hidden = (base.embed_tokens if llama else base.wte)(x)
        positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        if tokens and not llama:
            hidden = base.drop(hidden + base.wpe(positions))
        mask = create_causal_mask(
            config=self.config, inputs_embeds=hidden, attention_mask=None, cache=None, position_ids=positions
        )
        if llama:
            rotary = base.rotary_emb(hidden, position_ids=positions)
            for layer in base.layers:
                hidden = layer(
                    hidden, attention_mask=mask, position_ids=positions, position_embeddings=rotary
                )
            hidden = base.norm(hidden)
        else:
            for block in base.h:
                hidden = block(hidden, attention_mask=mask, position_ids=positions)
            hidden = base.ln_f(hidden)
        out: torch.Tensor = self.get_submodule("lm_head")(hidden)
        return out


def _hf_config(args: dict[str, Any]) -> Any:
    from transformers import AutoConfig

    given = args.get("config")
    path = args.get("path")
    if given is not None and not isinstance(given, dict):
        raise ModelLoadError(f"{_FIELD}.config: expected a JSON object, got {type(given).__name__}")
    if path:
        folder = Path(str(path))
        if not (folder / "config.json").is_file():
            raise ModelLoadError(
                f"{_FIELD}.path: {path!r} has no config.json; give a local directory written by "
                "save_pretrained (on a volume: nothing is downloaded)"
            )
        return AutoConfig.from_pretrained(str(folder), local_files_only=True, **(given or {}))
    if not given or "model_type" not in given:
        raise ModelLoadError(
            f"{_FIELD}: give config (a transformers configuration with its model_type, e.g. "
            '{"model_type": "llama", "hidden_size": 256, ...}) or path (a save_pretrained directory)'
        )
    rest = {k: v for k, v in given.items() if k != "model_type"}
    try:
        return AutoConfig.for_model(str(given["model_type"]), **rest)
    except ValueError as exc:
        raise ModelLoadError(f"{_FIELD}.config.model_type: {exc}") from None


def causal_lm(config: TrainConfig) -> TorchModel:
    """A ``transformers`` causal LM built from ``config.model_args`` (see the module docstring)."""
    from transformers import AutoModelForCausalLM

    args = config.model_args
    hf_config = _hf_config(args)
    # fp32 parameters whatever dtype the weights were saved in: the runtime trains in fp32, under
    # bf16 autocast on a GPU (``precision``); the weights are converted as they are read.
    lm = AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]
        hf_config, attn_implementation=str(args.get("attn_implementation", "sdpa")), dtype=torch.float32
    )
    shared: tuple[str, ...]
    if hasattr(lm, "model") and hasattr(lm.model, "layers") and hasattr(lm.model, "rotary_emb"):
        base, blocks, shared = "model", "model.layers", ("model.rotary_emb",)
    elif hasattr(lm, "transformer") and hasattr(lm.transformer, "h") and hasattr(lm.transformer, "wpe"):
        base, blocks, shared = "transformer", "transformer.h", ()
    else:
        raise ModelLoadError(
            f"{_FIELD}.config.model_type: {type(lm).__name__} is neither Llama-style (model.layers "
            "with a rotary embedding) nor GPT-2-style (transformer.h); write a TorchModel factory for it"
        )
    positions = int(getattr(hf_config, "n_positions", 0) or 0)
    if base == "transformer" and 0 < positions < config.seq_len:  # learned positions: no more rows
        raise ModelLoadError(
            f"entrypoint.module.seqLen (training config: seq_len): {config.seq_len} tokens per sample, "
            f"but the model's learned position embedding has n_positions = {positions} rows; lower "
            f"seqLen to at most {positions}, or raise n_positions in {_FIELD}.config"
        )
    path = str(args.get("path") or "")
    return TorchModel(
        module=CausalLMStages(lm, base),
        cuts=blocks,
        shared=shared,
        loss_fn=causal_lm_loss,
        init=lm._init_weights,
        weights=path,
        tokens_per_sample=config.seq_len,
        vocab_size=int(hf_config.vocab_size),
    )
