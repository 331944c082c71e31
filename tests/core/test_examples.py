"""examples/*.toml validate with `grpo config validate` (no network), and their data paths work:
GSM8K from local rows (the hub source swapped with --set), the email example's bundled JSONL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grpo_core.config import load_config
from grpo_core.data import format_prompt, load_rows
from grpo_rewards.command_line import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GSM8K = Path("/work/shared/data/gsm8k/train.jsonl")


def run_configs() -> list[str]:
    """The example run configs (those with a [model] table; reward-only files are for `grpo rewards score`)."""
    import tomllib

    return sorted(p.name for p in EXAMPLES.glob("*.toml") if "model" in tomllib.loads(p.read_text()))


@pytest.mark.parametrize("name", run_configs())
def test_example_validates(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "validate", str(EXAMPLES / name)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.startswith("ok: ")


def test_the_expected_examples_exist() -> None:
    assert {"gsm8k.toml", "email.toml"} <= set(run_configs())


def test_gsm8k_example_is_qlora_qwen_with_the_unsloth_rewards() -> None:
    cfg = load_config(EXAMPLES / "gsm8k.toml")
    assert cfg.model.name_or_path == "Qwen/Qwen2.5-1.5B-Instruct"
    assert cfg.quantization.load_in_4bit and cfg.quantization.quant_type == "nf4" and cfg.lora.enabled
    assert [e.use for e in cfg.rewards.entries] == ["exact_match", "integer_format", "strict_format", "soft_format", "xml_count"]


@pytest.mark.skipif(not GSM8K.exists(), reason="local GSM8K rows not present")
def test_gsm8k_example_on_local_rows(capsys: pytest.CaptureFixture[str], tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    overrides = [f"data.source={GSM8K}", "data.limit=16"]
    assert main(["config", "validate", str(EXAMPLES / "gsm8k.toml"), "--data", "--set", overrides[0]]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"data: 7473 rows from {GSM8K} [train]; columns question, answer; first prompt: 'Natalia")
    assert "warning" not in err
    cfg = load_config(EXAMPLES / "gsm8k.toml", overrides)
    rows = load_rows(cfg.data)
    assert len(rows) == 16 and rows[0]["question"].startswith("Natalia sold clips")
    prompt = format_prompt(rows[0], cfg.data, AutoTokenizer.from_pretrained(tiny_model_dir))
    assert "<reasoning>" in prompt and rows[0]["question"] in prompt  # system prompt + question via the chat template
    finals = [r["answer"].split("####")[-1].strip() for r in rows]
    perfect = [f"<reasoning>\nstep by step\n</reasoning>\n<answer>\n{f}\n</answer>\n" for f in finals]
    wrong = [f"<reasoning>\nstep by step\n</reasoning>\n<answer>\n{int(f.replace(',', '')) + 1}\n</answer>\n" for f in finals]
    columns: dict[str, Any] = {k: [r[k] for r in rows] for k in rows[0]}
    # Unsloth's maxima: correct 2.0 + int 0.5 + strict 0.5 + soft 0.5 + xml 4 * 0.125
    assert cfg.rewards(perfect, **columns) == [pytest.approx(4.0)] * 16
    assert cfg.rewards(wrong, **columns) == [pytest.approx(2.0)] * 16


def test_email_example_data_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "validate", str(EXAMPLES / "email.toml"), "--data"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("data: 12 rows from ") and err == ""
    assert main(["config", "validate", str(EXAMPLES / "email.toml"), "--data",
                 "--set", "rewards.email.recipient_column=to"]) == 0
    assert capsys.readouterr().err == ("warning: reward 'email' reads column 'to', which the data does not have "
                                       "(columns: ideal, keywords, prompt, recipient)\n")
    assert main(["config", "validate", str(EXAMPLES / "email.toml"), "--data", "--set", "data.prompt_field=body"]) == 2
    assert capsys.readouterr().err.startswith("error: data.prompt_field: column 'body' not in ")


def test_email_example_data_and_rewards() -> None:
    cfg = load_config(EXAMPLES / "email.toml")
    rows = load_rows(cfg.data)
    assert len(rows) >= 10 and {"prompt", "keywords", "recipient"} <= set(rows[0])
    row = rows[0]  # Maria Lopez, keywords Friday + report
    good = ("Hi Maria,\n\nYes, moving the report to Friday works for me. I will send it by Friday noon.\n\n"
            "Best regards,\nAlex Smith\nPhone: +1 415 555 0132")
    bad = "ok " * 200
    scores = cfg.rewards([good, bad], **{k: [row[k], row[k]] for k in row})
    assert scores[0] == pytest.approx(3.0)  # keywords 1 + name 1 + signature 1
    assert scores[1] == pytest.approx(-1.0)  # too long, nothing else
