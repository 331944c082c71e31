"""Sandboxed execution of untrusted, model-written programs (Python, C, C++), and the code rewards.

``pool`` (the local sandbox: zygotes per slot) and ``jail/`` (what runs inside a zygote
and its children: Landlock, seccomp, rlimits, mounts) do the isolation; ``probe`` picks
the profile and fails closed; ``judge`` computes verdicts outside the sandbox from the
formats ``tests_formats`` parses and the code ``extract`` finds; ``backends/`` puts
``local``, SandboxFusion and Piston behind one interface; ``server`` exposes the local
sandbox over HTTP; ``reward`` and ``plugin`` register ``code_execution`` and
``code_execution_binary``; ``cli`` adds ``grpo sandbox probe|run|serve``. Importing this
package imports nothing heavy. User docs: ``docs/sandbox.md``.
"""
