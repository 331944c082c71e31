"""The trainer's command line: ``grpo train``, ``grpo config validate``, ``grpo signal``, ``grpo plot``, ``grpo eval``.

``commands/``       one module per command, registered through ``grpo_register_commands`` (``commands/__init__``,
                    an entry point of the ``grpo`` group)
``checks``          what a run is checked for before any model loads (shared by train, config validate, signal)
``launch``          ``grpo train --nproc N``: the run started on N processes through torchrun
``argument_types``  argparse types and options the commands share
"""

import os

# Deprecated module paths of this package (grpo_core.cli.eval_command) are found in grpo_core/_aliases/cli.
__path__.append(os.path.join(os.path.dirname(os.path.dirname(__file__)), "_aliases", "cli"))
