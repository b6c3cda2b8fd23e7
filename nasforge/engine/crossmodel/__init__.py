"""Cross-model optimizations of the multi-trial engine (Retiarii §4–5): the models a search
trains are nearly alike, so the engine merges what they share (docs/crossmodel.md).

    policy       (pure, no torch) which optimization applies, the frozen-prefix rule, and the
                 introspective keep/revert rule
    plan         the engine's one hook: detect, apply, measure, fall back, record
    supergraph   weight-sharing trials train one in-memory super-graph
                 (``nasforge.weightsharing.SinglePath``, SPOS's single-path supernet),
                 activated by control flow, instead of checkpointing the shared weights
    opbatch      models over one frozen prefix run it once per batch and train their trainable
                 parts together (stacked weights, ``torch.func.vmap``); ``groups`` applies it
                 to the engine's trials
    shareddata   concurrent trials with one data specification read the batches one producer
                 made, through shared memory; ``feeds`` applies it to the engine's process pool;
                 ``pipelines`` registers augmented MNIST
    mixed        mixed parallelism: W workers train different architectures of one super-graph
                 on different batches and average the shared gradients; the data-parallel
                 baseline with synchronised batch norm

Only the submodules import torch; importing this package does not.
"""

__all__: list[str] = []
