"""Running the update on one process or many: the :class:`~grpo_core.parallel.engine.Engine` interface and its
implementations, registered by name through ``grpo_register_engines`` (:mod:`grpo_core.plugin`).

``engine``       the interface, and the single-process engine (the model as it is)
``ddp``          ``engine = "ddp"`` with several processes: DistributedDataParallel
``fsdp``         ``engine = "fsdp2"``: FSDP2 sharding, full state dicts of a sharded model
``deepspeed``    ``engine = "deepspeed"``: ZeRO, its JSON from the run config, state save and load
``distributed``  the world from torchrun's environment, process groups, collectives, the DDP wrapper
"""
