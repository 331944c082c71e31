"""A toy sandbox language defined outside the package, as a plugin would: strict C89 through gcc."""

from grpo_rewards.sandbox.languages import Language, register

C89 = Language("c89", aliases=("ansi-c",), suffixes=(".c89",), compiler="gcc",
               flags=("-std=c89", "-pedantic-errors", "-O2", "-o", "a.out", "main.c"), source_name="main.c",
               stdio_only=True)
register(C89)
