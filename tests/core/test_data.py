"""grpo_core.data: local files, registered sources, hub errors, column mapping, prompts, eval split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from grpo_core.config import DataConfig
from grpo_core.data import DataError, epoch_order, format_prompt, load_rows, read_local, train_eval_rows
from grpo_rewards import hookimpl
from grpo_rewards.plugins import load_registry

ROWS = [{"question": f"What is {i} plus {i}?", "answer": str(2 * i), "level": i % 3} for i in range(10)]
GSM8K = Path("/work/shared/data/gsm8k/train.jsonl")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = {"jsonl": tmp_path / "d.jsonl", "json": tmp_path / "d.json", "csv": tmp_path / "d.csv",
           "parquet": tmp_path / "d.parquet"}
    out["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in ROWS) + "\n")
    out["json"].write_text(json.dumps(ROWS))
    out["csv"].write_text("question,answer,level\n" + "".join(f"\"{r['question']}\",{r['answer']},{r['level']}\n" for r in ROWS))
    pq.write_table(pa.Table.from_pylist(ROWS), out["parquet"])
    return out


@pytest.mark.parametrize("kind", ["jsonl", "json", "csv", "parquet"])
def test_local_formats(files: dict[str, Path], kind: str) -> None:
    rows = load_rows(DataConfig(source=str(files[kind]), prompt_field="question", answer_field="answer"))
    assert [r["question"] for r in rows] == [r["question"] for r in ROWS]
    assert [str(r["answer"]) for r in rows] == [r["answer"] for r in ROWS]
    assert "level" in rows[0]  # other columns are kept for the rewards


def test_rename_limit_and_answer_alias(files: dict[str, Path]) -> None:
    cfg = DataConfig(source=str(files["jsonl"]), columns={"question": "prompt", "answer": "solution"},
                     answer_field="solution", limit=4)
    rows = load_rows(cfg)
    assert len(rows) == 4 and rows[1]["prompt"] == "What is 1 plus 1?"
    assert rows[1]["solution"] == rows[1]["answer"] == "2"  # rewards read `answer`


def test_clear_errors(files: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"data.prompt_field: column 'prompt' not in .*columns: question, answer, level"):
        load_rows(DataConfig(source=str(files["jsonl"])))
    with pytest.raises(DataError, match="data.answer_field: column 'gold'"):
        load_rows(DataConfig(source=str(files["jsonl"]), prompt_field="question", answer_field="gold"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a"}\n{"prompt": \n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: invalid JSON"):
        read_local(bad)
    with pytest.raises(DataError, match="file not found"):
        load_rows(DataConfig(source=str(tmp_path / "nope.jsonl")))


def test_hub_failure_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    def offline(*a: Any, **k: Any) -> Any:
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)\nmore detail")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError) as info:
        load_rows(DataConfig(source="openai/gsm8k", subset="main", prompt_field="question"))
    assert str(info.value) == ("data.source: cannot load hub dataset 'openai/gsm8k' (split 'train'): "
                               "Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)")


def test_hub_dataset_through_datasets(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    seen = {}

    def fake(name: str, subset: str | None, split: str) -> Any:
        seen.update(name=name, subset=subset, split=split)
        return datasets.Dataset.from_list(ROWS)

    monkeypatch.setattr(datasets, "load_dataset", fake)
    rows = load_rows(DataConfig(source="openai/gsm8k", subset="main", prompt_field="question"), split="test")
    assert seen == {"name": "openai/gsm8k", "subset": "main", "split": "test"} and len(rows) == 10


def test_registered_source() -> None:
    import grpo_core.plugin  # specifies the trainer's hooks (grpo_register_dataset_sources among them)

    class Source:
        @hookimpl
        def grpo_register_dataset_sources(self, register: Any) -> None:
            register("count", lambda spec: ({"prompt": f"{spec['source']} {spec['split']} {i}"} for i in range(3)))

    # the registry is given per call: the process-wide one (which has no "count" source) is not consulted
    registry = load_registry(entry_points=False, extra_plugins=[("builtin_trainer", grpo_core.plugin),
                                                                ("src", Source())])
    rows = load_rows(DataConfig(source="count:3"), split="eval", registry=registry)
    assert rows == [{"prompt": f"count:3 eval {i}"} for i in range(3)]
    train, held = train_eval_rows(DataConfig(source="count:3", eval_split="test"), registry)
    assert [r["prompt"] for r in held] == [f"count:3 test {i}" for i in range(3)] and len(train) == 3
    from grpo_rewards import PluginError

    with pytest.raises(PluginError, match="unknown dataset source 'cuont'; did you mean 'count'"):
        load_rows(DataConfig(source="cuont:3"), registry=registry)
    with pytest.raises(PluginError, match="unknown dataset source 'count'"):
        load_rows(DataConfig(source="count:3"))  # the process-wide registry


def test_eval_rows_held_out_or_separate(files: dict[str, Path]) -> None:
    cfg = DataConfig(source=str(files["jsonl"]), prompt_field="question", eval_size=3)
    train, held = train_eval_rows(cfg)
    assert len(train) == 7 and len(held) == 3 and not {r["question"] for r in train} & {r["question"] for r in held}
    cfg = DataConfig(source=str(files["jsonl"]), prompt_field="question", eval_source=str(files["csv"]), eval_size=2)
    train, held = train_eval_rows(cfg)
    assert len(train) == 10 and [r["answer"] for r in held] == ["0", "2"]
    with pytest.raises(DataError, match="data.eval_size"):
        train_eval_rows(DataConfig(source=str(files["jsonl"]), prompt_field="question", eval_size=10))
    assert train_eval_rows(DataConfig(source=str(files["jsonl"]), prompt_field="question"))[1] == []


def test_epoch_order_is_a_function_of_seed_and_epoch() -> None:
    a = epoch_order(50, 0, seed=1, shuffle=True)
    assert sorted(a) == list(range(50)) and a != list(range(50))
    assert a == epoch_order(50, 0, seed=1, shuffle=True)
    assert a != epoch_order(50, 1, seed=1, shuffle=True) and a != epoch_order(50, 0, seed=2, shuffle=True)
    assert epoch_order(5, 3, seed=1, shuffle=False) == [0, 1, 2, 3, 4]


def test_format_prompt_chat_and_plain(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    row = {"question": "What is 2 plus 2?"}
    cfg = DataConfig(source="x", prompt_field="question", system_prompt="Answer in tags.")
    assert format_prompt(row, cfg, tok) == "<|system|>Answer in tags.</s><|user|>What is 2 plus 2?</s><|assistant|>"
    msgs = {"question": [{"role": "user", "content": "hi"}]}
    assert format_prompt(msgs, cfg, tok) == "<|system|>Answer in tags.</s><|user|>hi</s><|assistant|>"
    plain = DataConfig(source="x", prompt_field="question", system_prompt="Answer in tags.", chat_template=False)
    assert format_prompt(row, plain, tok) == "Answer in tags.\n\nWhat is 2 plus 2?"
    assert format_prompt(row, DataConfig(source="x", prompt_field="question", chat_template=False), tok) == row["question"]
    tok.chat_template = None
    with pytest.raises(DataError, match="data.chat_template: the tokenizer has no chat template"):
        format_prompt(row, cfg, tok)


@pytest.mark.skipif(not GSM8K.exists(), reason="local GSM8K rows not present")
def test_local_gsm8k_rows() -> None:
    rows = load_rows(DataConfig(source=str(GSM8K), prompt_field="question", answer_field="answer"))
    assert len(rows) == 7473 and rows[0]["answer"].rstrip().endswith("#### 72")
