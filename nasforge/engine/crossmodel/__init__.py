"""Cross-model optimizations of the multi-trial engine (Retiarii §4–5): the models a search
trains are nearly alike, so the engine merges what they share.

    supergraph   weight-sharing trials train one in-memory supernet, activated by control flow,
                 instead of checkpointing the shared weights around each trial
    opbatch      trials over one frozen prefix run it once per batch and train their trainable
                 parts together (stacked weights, ``torch.func.vmap``)
    shareddata   concurrent trials with one data specification read the batches one producer
                 made, through shared memory
    mixed        mixed parallelism: W workers train different architectures of one supernet on
                 different batches and average the shared gradients
    policy       (pure, no torch) which optimization applies, and the introspective keep/revert
                 rule
    plan         the engine's one hook: detect, apply, measure, fall back, record

Only the submodules import torch; importing this package does not.
"""

__all__: list[str] = []
