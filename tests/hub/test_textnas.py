"""TextNAS's space: its decisions and size, the BERT embedding from a config, a search."""

from __future__ import annotations

import torch

import nasforge as nf
from nasforge.hub.textnas import TEXTNAS_OPS, TextNASSpace

from ._mobile import text_searches

TINY = {"n_layers": 3, "channels": 16, "vocab_size": 100, "bert_hidden": 16, "max_length": 12}


def test_decisions_and_size() -> None:
    """Per layer l: its input among l + 1 outputs, 8 operations, a skip from each earlier layer."""
    ss = TextNASSpace(**TINY).search_space()
    assert [d.label for d in ss.decisions][:5] == [
        "l0.input",
        "l0.op",
        "l1.input",
        "l1.op",
        "l1.skip0",
    ]
    assert ss["l2.op"].values == TEXTNAS_OPS
    assert ss.size == (8 * 1 * 1) * (8 * 2 * 2) * (8 * 3 * 4)


def test_the_embedding_is_berts_built_from_a_config() -> None:
    """The embedding is transformers' BertEmbeddings with the configured vocabulary."""
    from transformers.models.bert.modeling_bert import BertEmbeddings

    space = TextNASSpace(**TINY)
    model = nf.freeze(space, space.search_space().sample(0))
    assert isinstance(model.embedding, BertEmbeddings)
    assert model.embedding.word_embeddings.num_embeddings == 100
    assert model(torch.randint(0, 100, (2, 12))).shape == (2, 5)


def test_random_and_evolution_search_run(tmp_path) -> None:
    """A short random and evolution search train every sampled network for one step."""
    text_searches(TextNASSpace(**TINY), tmp_path)
