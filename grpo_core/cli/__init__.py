"""The trainer's command line: ``grpo train``, ``grpo config validate``, ``grpo signal``, ``grpo plot``, ``grpo eval``.

``commands/``       one module per command, registered through ``grpo_register_commands`` (``commands/__init__``,
                    an entry point of the ``grpo`` group)
``checks``          what a run is checked for before any model loads (shared by train, config validate, signal)
``launch``          ``grpo train --nproc N``: the run started on N processes through torchrun
``argument_types``  argparse types and options the commands share
"""
