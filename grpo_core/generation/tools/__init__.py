"""Tools a model calls during a rollout.

``formats``   how a chat template writes tool calls (a parser per format) and the ids that follow them
``toolset``   named Python functions as tools: schemas, calls run on threads with a timeout, errors as text
``builtin``   the built-in tools: ``calculator`` and the sandbox's ``python``
``facts``     what rewards see of a multi-turn batch: its conversations, its facts as columns
"""
