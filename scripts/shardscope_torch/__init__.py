"""shardscope's models and FSDP wrappings in plain PyTorch, for the oracle suites and measurements.

Everything here builds, from the same scenario keys shardscope reads (``model.hidden``,
``fsdp.reshard_after_forward``, ...), the PyTorch program that scenario describes, so that what
PyTorch issues and allocates can be compared with what ``shardscope lower`` and ``simulate``
predict. Modules:

- ``model``: the transformer family (Llama-style and GPT-style blocks), the loss recipes and
  activation checkpointing;
- ``fsdp``: FSDP2 ``fully_shard`` and FSDP1 ``FullyShardedDataParallel`` from ``fsdp.*`` keys;
- ``collectives``: a recorder of every collective PyTorch issues, with its process group, bytes,
  FSDP group, hook, phase, iteration and micro-batch;
- ``train``: the training step a scenario describes (micro-batches, gradient sync, optimizer);
- ``shardscope``: running the ``shardscope`` CLI on the same keys and reading its IR.
"""
