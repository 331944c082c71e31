"""The embedded demo: a tiny model learns arithmetic with GRPO on a CPU, with nothing downloaded.

``task``     the arithmetic problems (dataset source ``demo:arithmetic``) and the answer format
``tiny``     a character-level tokenizer trained on the spot and a tiny Llama, saved with save_pretrained
``warmup``   the short supervised warm-up on the answer format ("start strong")
``evaluate`` held-out exact-match accuracy with greedy decoding
``run``      ``grpo demo``: build -> warm up -> evaluate -> GRPO -> evaluate, and the curve PNG

The tool example (``examples/tool_calculator.toml``, ``benchmarks/tool_example.py``) beside it:
``tool_task`` (products, dataset source ``demo:multiplication``), ``tool_model`` (the tiny model with a chat
template that writes tool calls, its warm-up conversations), ``tool_run`` (one arm: build, warm up, GRPO, curve).
"""
