"""The config of a frozen Hugging Face model, rewritten to the sizes its modules now have.

A module-level space (:class:`~nasforge.space.module_mutator.ModuleMutator`) freezes a
``transformers`` model into its own class, so ``save_pretrained`` works; but the model's
``config`` is still the base model's, and ``from_pretrained`` builds the base sizes and then
fails on every resized weight. :func:`sync_config` reads the sizes back from the modules and
writes them into the frozen model's config, so ``config.json`` describes the weights next to
it:

    ====================  =====================================================================
    family                config attributes read from the modules
    ====================  =====================================================================
    GPT-2                 ``n_layer`` (blocks), ``n_embd``, ``vocab_size``, ``n_positions``,
                          ``n_inner`` (FFN width), ``n_head`` (each attention's heads)
    Llama-like (Llama,    ``num_hidden_layers``, ``hidden_size``, ``vocab_size``,
    Mistral, Qwen2, ...)  ``intermediate_size`` (FFN width), ``num_attention_heads``,
                          ``num_key_value_heads``, ``head_dim``
    ====================  =====================================================================

A config holds one value per attribute. Where the blocks differ (FFN widths chosen per layer,
say) or the model is of another family whose weights changed shape, the config cannot
describe the model: :func:`sync_config` returns those attributes and leaves the config as it
was; :class:`~nasforge.space.mutator.MutatedSpace` logs a warning naming them, and
``nasforge export --hf`` refuses with the same words. Tie the decision across layers
(``ModuleMutator(..., tie=True)``) to keep a searched model loadable by ``from_pretrained``.

Nothing here imports ``transformers``: a model is a Hugging Face model when it is an instance
of ``transformers.PreTrainedModel``, which is then imported already.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from torch import nn

from nasforge.errors import SpaceError

__all__ = ["is_hf_model", "sync_config", "check_config", "unmapped_message"]


def is_hf_model(model: Any) -> bool:
    """Returns whether ``model`` is a ``transformers.PreTrainedModel`` (False when
    ``transformers`` was never imported)."""
    transformers = sys.modules.get("transformers")
    base = getattr(transformers, "PreTrainedModel", None) if transformers else None
    return base is not None and isinstance(model, base)


def _one(values: dict[int, int], attr: str, unmapped: dict[str, str]) -> int | None:
    """Returns the value every layer shares, or None (noting ``attr``) when they differ."""
    distinct = sorted(set(values.values()))
    if len(distinct) == 1:
        return distinct[0]
    if distinct:
        shown = ", ".join(f"layer {i}: {v}" for i, v in sorted(values.items())[:6])
        unmapped[attr] = f"differs across layers ({shown})"
    return None


def _gpt2(model: nn.Module, unmapped: dict[str, str]) -> dict[str, int | None]:
    core: Any = model.transformer
    blocks = list(core.h)
    ffn = {i: int(b.mlp.c_fc.weight.shape[1]) for i, b in enumerate(blocks)}
    heads = {i: int(b.attn.num_heads) for i, b in enumerate(blocks)}
    return {
        "n_layer": len(blocks),
        "n_embd": int(core.wte.embedding_dim),
        "vocab_size": int(core.wte.num_embeddings),
        "n_positions": int(core.wpe.num_embeddings),
        "n_inner": _one(ffn, "n_inner", unmapped),
        "n_head": _one(heads, "n_head", unmapped),
    }


def _llama(model: nn.Module, unmapped: dict[str, str]) -> dict[str, int | None]:
    core: Any = model.model
    layers = list(core.layers)
    ffn = {i: int(x.mlp.gate_proj.out_features) for i, x in enumerate(layers)}
    head_dim = {i: int(x.self_attn.head_dim) for i, x in enumerate(layers)}
    dim = _one(head_dim, "head_dim", unmapped)
    out: dict[str, int | None] = {
        "num_hidden_layers": len(layers),
        "hidden_size": int(core.embed_tokens.embedding_dim),
        "vocab_size": int(core.embed_tokens.num_embeddings),
        "intermediate_size": _one(ffn, "intermediate_size", unmapped),
        "head_dim": dim,
    }
    if dim:
        q = {i: int(x.self_attn.q_proj.out_features) // dim for i, x in enumerate(layers)}
        kv = {i: int(x.self_attn.k_proj.out_features) // dim for i, x in enumerate(layers)}
        out["num_attention_heads"] = _one(q, "num_attention_heads", unmapped)
        out["num_key_value_heads"] = _one(kv, "num_key_value_heads", unmapped)
    return out


def _family(model: nn.Module) -> Callable[[nn.Module, dict[str, str]], dict[str, Any]] | None:
    """Returns the size reader of the model's family, or None for a family it does not know."""
    core = getattr(model, "transformer", None)
    if core is not None and hasattr(core, "h") and hasattr(core, "wte") and hasattr(core, "wpe"):
        return _gpt2
    core = getattr(model, "model", None)
    layers = getattr(core, "layers", None)
    if (
        isinstance(layers, nn.ModuleList)
        and hasattr(core, "embed_tokens")
        and all(hasattr(x, "mlp") and hasattr(x, "self_attn") for x in layers)
        and all(hasattr(x.mlp, "gate_proj") and hasattr(x.self_attn, "q_proj") for x in layers)
    ):
        return _llama
    return None


def _shapes(model: nn.Module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def sync_config(model: nn.Module, base: nn.Module | None = None) -> dict[str, str]:
    """Returns ``{config attribute: why}`` for the sizes of the frozen Hugging Face ``model``
    that its config cannot express (empty: ``model.config`` now holds every size, and
    ``save_pretrained`` writes a ``config.json`` that ``from_pretrained`` loads).

    The config is rewritten in place (it is the frozen model's own copy) only when every size
    maps onto it. ``base`` is the unmutated model: for a family this module does not know, a
    weight whose shape differs from the base's (or that the base lacks) is returned as
    unmapped; without ``base`` such a model is left as it is. A model that is not a
    ``transformers.PreTrainedModel`` is left as it is.
    """
    if not is_hf_model(model):
        return {}
    config: Any = model.config
    read = _family(model)
    unmapped: dict[str, str] = {}
    if read is None:
        if base is not None:
            before, after = _shapes(base), _shapes(model)
            changed = sorted(k for k in after if before.get(k) != after[k])
            changed += sorted(set(before) - set(after))
            if changed:
                unmapped["(weights)"] = (
                    f"{len(changed)} weights of this {type(model).__name__} changed shape or "
                    f"number (e.g. {changed[0]}), and nasforge does not know which attributes "
                    f"of a {getattr(config, 'model_type', '?')!r} config hold them"
                )
        return unmapped
    sizes = read(model, unmapped)
    if unmapped:
        return unmapped
    for attr, value in sizes.items():
        if value is not None and hasattr(config, attr):
            setattr(config, attr, value)
    return {}


def check_config(model: nn.Module, base: nn.Module | None = None) -> None:
    """Returns None once ``model.config`` holds every size of the frozen Hugging Face
    ``model`` (see :func:`sync_config`).

    Raises:
        SpaceError: a size the config cannot express; the message names each attribute, why,
            and the fix.
    """
    unmapped = sync_config(model, base)
    if unmapped:
        raise SpaceError(unmapped_message(model, unmapped))


def unmapped_message(model: nn.Module, unmapped: dict[str, str]) -> str:
    """Returns one line naming the config attributes a frozen model's sizes do not map onto."""
    what = "; ".join(f"{attr} {why}" for attr, why in unmapped.items())
    return (
        f"the config of this frozen {type(model).__name__} cannot hold its sizes: {what}; "
        "its config.json keeps the base model's sizes, so from_pretrained cannot load it. "
        "Tie the choice across layers (ModuleMutator(..., tie=True)) for one value per "
        "attribute, or load the model with nasforge.load_model"
    )
