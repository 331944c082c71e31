"""The trainer's command line: ``grpo train``, ``grpo config ...``, ``grpo plot``, ``grpo signal``.

``commands``  the commands, registered through ``grpo_register_commands`` (an entry point of the ``grpo`` group)
"""
