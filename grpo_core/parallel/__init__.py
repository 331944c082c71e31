"""Running the update on one process or many: process groups, DDP, FSDP2 and DeepSpeed.

``distributed``  the world from torchrun's environment, process groups, collectives, DDP
``fsdp``         FSDP2 sharding, full state dicts of a sharded model
``deepspeed``    DeepSpeed's ZeRO engine: its JSON from the run config, initialize, state save and load
"""
