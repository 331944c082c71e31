"""grpo_core.data at scale: rows read lazily (memory far below the file's size), datasets' split slicing on local
files, ``data_files`` and ``revision`` through ``datasets.load_dataset`` (its real ``json`` builder, offline),
streaming with datasets' buffer shuffle, and a streamed run resumed mid-epoch getting exactly the rows the
interrupted run would have got."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from grpo_core.config import DataConfig
from grpo_core.data import DataError, _error_key, load_rows, train_eval_rows
from grpo_core.row_stream import StreamedRows

ROWS = [{"question": f"What is {i} plus {i}?", "answer": str(2 * i), "level": i % 3} for i in range(50)]


@pytest.fixture
def jsonl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def questions(rows: Any) -> list[str]:
    return [r["question"] for r in rows]


def test_split_slices_of_a_local_file_as_datasets_reads_them(jsonl: Path, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cfg = DataConfig(source=str(jsonl), prompt_field="question")
    assert questions(load_rows(cfg, split="train[:3]")) == questions(ROWS[:3])
    assert questions(load_rows(cfg, split="train[90%:]")) == questions(ROWS[45:])
    assert questions(load_rows(cfg, split="train[:2]+train[-1:]")) == questions(ROWS[:2] + ROWS[-1:])
    # the same slices as datasets' own json builder gives for the file
    import datasets

    for split in ("train[10:20]", "train[:10%]", "train[-7:]"):
        theirs = datasets.load_dataset("json", data_files=str(jsonl), split=split)
        assert questions(load_rows(cfg, split=split)) == theirs["question"], split
    parquet = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), parquet)
    csv = tmp_path / "d.csv"
    csv.write_text("question,answer\n" + "".join(f"\"{r['question']}\",{r['answer']}\n" for r in ROWS))
    for path in (parquet, csv):
        rows = load_rows(DataConfig(source=str(path), prompt_field="question", split="train[-5:]"))
        assert questions(rows) == questions(ROWS[-5:]) and [str(r["answer"]) for r in rows][-1] == "98"
    with pytest.raises(DataError, match=r"^data.split: 'train\[:zz\]': Unrecognized instruction format"):
        load_rows(cfg, split="train[:zz]")
    with pytest.raises(DataError, match=r"^data.split: 'test\[:5\]': .*d.jsonl has one split, 'train'"):
        load_rows(cfg, split="test[:5]")


def test_held_out_rows_as_a_slice_of_a_local_file(jsonl: Path) -> None:
    cfg = DataConfig(source=str(jsonl), prompt_field="question", split="train[:-5]", eval_split="train[-5:]")
    train, held = train_eval_rows(cfg)
    assert questions(train) == questions(ROWS[:-5]) and questions(held) == questions(ROWS[-5:])


def test_data_files_through_the_json_builder(jsonl: Path, tmp_path: Path) -> None:
    second = tmp_path / "more.jsonl"
    second.write_text(json.dumps({"question": "extra", "answer": "1", "level": 0}) + "\n")
    rows = load_rows(DataConfig(source="json", data_files=str(jsonl), prompt_field="question", answer_field="answer"))
    assert questions(rows) == questions(ROWS) and rows[3]["answer"] == "6"
    both = load_rows(DataConfig(source="json", data_files=[str(jsonl), str(second)], prompt_field="question"))
    assert len(both) == len(ROWS) + 1 and both[len(ROWS)]["question"] == "extra"
    by_split = DataConfig(source="json", data_files={"train": str(jsonl), "test": str(second)}, prompt_field="question",
                          split="train[:4]", eval_split="test")
    train, held = train_eval_rows(by_split)
    assert questions(train) == questions(ROWS[:4]) and questions(held) == ["extra"]
    globbed = load_rows(DataConfig(source="json", data_files=str(tmp_path / "*.jsonl"), prompt_field="question"))
    assert len(globbed) == len(ROWS) + 1
    with pytest.raises(DataError, match=r"^data.data_files: no file matches '.*nope\*.jsonl'$"):
        load_rows(DataConfig(source="json", data_files=str(tmp_path / "nope*.jsonl"), prompt_field="question"))
    with pytest.raises(DataError, match=r"^data.split: cannot load dataset 'json' \(split 'validation'\): Unknown split"):
        load_rows(DataConfig(source="json", data_files=str(jsonl), prompt_field="question", split="validation"))


def test_revision_reaches_datasets(jsonl: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The revision is handed to the real datasets.load_dataset (recorded on the way through), and a revision
    the hub does not have is reported on the key data.revision."""
    import datasets
    from huggingface_hub.errors import RevisionNotFoundError

    real, seen = datasets.load_dataset, []

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("revision"))
        return real(*args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", recording)
    rows = load_rows(DataConfig(source="json", data_files=str(jsonl), revision="main", prompt_field="question"))
    assert seen == ["main"] and len(rows) == len(ROWS)
    import httpx

    missing = RevisionNotFoundError("404 Client Error. Revision Not Found for url", response=httpx.Response(
        404, request=httpx.Request("GET", "https://huggingface.co/api/datasets/org/name/revision/v9")))
    assert _error_key(missing, {"revision": "v9"}) == "revision"
    assert _error_key(ValueError("Unknown split \"dev\""), {"revision": "v9"}) == "split"


def _stream_cfg(jsonl: Path, **kw: Any) -> DataConfig:
    return DataConfig(source=str(jsonl), prompt_field="question", streaming=True, shuffle_buffer=8, seed=3, **kw)


def test_streaming_shuffles_in_datasets_buffer_per_epoch(jsonl: Path) -> None:
    import datasets

    rows, held = train_eval_rows(_stream_cfg(jsonl))
    assert isinstance(rows, StreamedRows) and held == []
    ids, epoch, position = rows.take(len(ROWS) + 5, 0, 0)
    seen = questions(rows[i] for i in ids)
    assert (epoch, position) == (1, 5)
    first, second = seen[: len(ROWS)], seen[len(ROWS):]
    assert sorted(first) == sorted(questions(ROWS)) and first != questions(ROWS)  # a permutation, shuffled
    base = datasets.load_dataset("json", data_files=str(jsonl), split="train", streaming=True)
    for epoch_number, ours in ((0, first), (1, second)):
        theirs = base.shuffle(seed=3, buffer_size=8)
        theirs.set_epoch(epoch_number)
        assert ours == questions(theirs)[: len(ours)]  # datasets' own buffer shuffle, seeded by seed and epoch
    assert first[:5] != second  # the next epoch is another order
    plain, _ = train_eval_rows(_stream_cfg(jsonl, shuffle=False, limit=7))
    ids, epoch, position = plain.take(9, 0, 0)
    assert questions(plain[i] for i in ids) == questions(ROWS[:7] + ROWS[:2]) and (epoch, position) == (1, 2)


def test_streamed_run_resumes_mid_epoch_with_the_same_rows(jsonl: Path) -> None:
    cfg = _stream_cfg(jsonl)
    whole, _ = train_eval_rows(cfg)
    epoch = position = 0
    steps = []
    for _ in range(20):  # 20 steps of 4 rows: over an epoch boundary
        ids, epoch, position = whole.take(4, epoch, position)
        steps.append((questions(whole[i] for i in ids), epoch, position))
    for stop in (3, 12, 13):  # a checkpoint after step `stop`: a fresh process restores (epoch, position)
        resumed, _ = train_eval_rows(cfg)
        epoch, position = steps[stop - 1][1:]
        for expected in steps[stop:]:
            ids, epoch, position = resumed.take(4, epoch, position)
            assert (questions(resumed[i] for i in ids), epoch, position) == expected


def test_streaming_holds_out_the_first_rows_and_checks_rows_as_read(jsonl: Path, tmp_path: Path) -> None:
    rows, held = train_eval_rows(_stream_cfg(jsonl, eval_size=5, shuffle=False))
    assert questions(held) == questions(ROWS[:5])
    ids, _, _ = rows.take(3, 0, 0)
    assert questions(rows[i] for i in ids) == questions(ROWS[5:8])
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:3]) + json.dumps({"question": "", "answer": "1",
                                                                                 "level": 0}) + "\n")
    rows, _ = train_eval_rows(_stream_cfg(bad, shuffle=False))
    with pytest.raises(DataError, match=r"^data.question: .*bad.jsonl \[train\]: row 4 of epoch 0: is empty$"):
        rows.take(4, 0, 0)


LAZY = """
import json, resource, sys
from grpo_core.config import DataConfig
from grpo_core.data import epoch_permutation, train_eval_rows
from grpo_core.prompt_fit import fit_rows

def peak_kb():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])

cfg = DataConfig(source=sys.argv[1], prompt_field="question", answer_field="answer", chat_template=False,
                 eval_size=100, max_prompt_length=None)
before = peak_kb()
rows, held = train_eval_rows(cfg)              # every row checked, in one streaming pass
rows, prompts = fit_rows(rows, cfg, None, True, "training")
order = epoch_permutation(len(rows), 0, seed=0, shuffle=True)
step = [int(i) for i in order[:8]]             # one step's rows and prompts, fetched on demand
fetched = [(rows[i]["answer"], prompts[i]) for i in step]
assert len(rows) == 199_900 and len(held) == 100 and all(p.startswith("Question") for _, p in fetched)
print(peak_kb() - before)
"""


def test_reading_is_lazy(tmp_path: Path) -> None:
    """A 200k-row JSONL (about 40 MB): loading, checking every row and fetching a step's rows raise the peak
    memory by far less than the file's size (holding the rows as Python objects takes several times it)."""
    path = tmp_path / "big.jsonl"
    with open(path, "w") as fh:
        for i in range(200_000):
            fh.write(json.dumps({"question": f"Question {i}: " + "what is the sum of these numbers? " * 4,
                                 "answer": str(i), "tests": [i, i + 1]}) + "\n")
    size_kb = path.stat().st_size // 1024
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(LAZY), str(path)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    growth_kb = int(out.stdout.split()[-1])
    assert growth_kb < size_kb / 3, f"peak memory grew {growth_kb} kB reading a {size_kb} kB file"


def _train_cfg(model_dir: Path, data: Path, out: Path, max_steps: int, **data_keys: Any) -> dict[str, Any]:
    return {
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": str(data), "prompt_field": "question", "chat_template": False, "max_prompt_length": 64,
                 "seed": 5, **data_keys},
        "generation": {"num_generations": 2, "max_completion_length": 2},
        "grpo": {"max_steps": max_steps, "prompts_per_step": 4, "learning_rate": 1e-3},
        "logging": {"output_dir": str(out), "progress": False, "plot": False},
        "checkpoint": {"every": 0, "keep_last": 1, "every_minutes": 0},  # at the end only
        "rewards": {"len": {"use": "core_len"}},
    }


def _seen(trainer: Any) -> list[list[str]]:
    """The prompts of the rows each step of ``trainer.train()`` takes."""
    steps: list[list[str]] = []
    take = trainer.next_rows

    def recording() -> list[int]:
        out = take()
        steps.append([trainer.rows[i]["question"] for i in out])
        return out

    trainer.next_rows = recording
    trainer.train()
    return steps


@pytest.mark.slow
@pytest.mark.parametrize("streaming", [True, False])
def test_a_resumed_run_takes_the_rows_the_whole_run_takes(tiny_model_dir: Path, tmp_path: Path,
                                                          use_core_registry: Any, streaming: bool) -> None:
    """Through the trainer and its checkpoints: 22 rows, 4 a step; a run stopped after step 3 (mid-epoch 0)
    and resumed takes at steps 4-7 (over the epoch boundary) exactly the rows an uninterrupted run takes."""
    from grpo_core.config import as_run_config
    from grpo_core.trainer import Trainer

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:22]))
    keys = {"streaming": streaming, "shuffle_buffer": 8}
    whole = _seen(Trainer(as_run_config(_train_cfg(tiny_model_dir, data, tmp_path / "whole", 7, **keys))))
    first = _seen(Trainer(as_run_config(_train_cfg(tiny_model_dir, data, tmp_path / "cut", 3, **keys))))
    assert first == whole[:3]
    rest = _seen(Trainer(as_run_config(_train_cfg(tiny_model_dir, data, tmp_path / "cut", 7, **keys)),
                         resume=True))
    assert rest == whole[3:] and len(rest) == 4
    epoch0 = [q for step in whole for q in step][:22]
    assert sorted(epoch0) == sorted(questions(ROWS[:22])) and epoch0 != questions(ROWS[:22])  # shuffled per epoch


@pytest.mark.parametrize(("data", "expected"), [
    ('split = "train[:zz]"', "data.split: 'train[:zz]': Unrecognized instruction format"),
    ('split = "test[:5]"', "data.split: a local file has no splits: 'test[:5]' would be ignored"),
    ('revision = "v1"', "data.revision: a local file has no revisions"),
    ('streaming = true\nsplit = "train[:5]"', "data.split: 'train[:5]': a streamed split cannot be sliced"),
    ('data_files = "rows.jsonl"', "data.data_files: needs a hub dataset, a folder or a builder name"),
    ('source = "json"\ndata_files = "nope*.jsonl"', "data.data_files: no file matches 'nope*.jsonl'"),
    ('source = "json"\ndata_files = "rows.jsonl"\nsplit = "dev"', "data.split: cannot load dataset 'json' (split "
                                                                  "'dev'): Unknown split \"dev\""),
])
def test_bad_data_keys_fail_validate_and_dry_run_in_one_line(tiny_model_dir: Path, tmp_path: Path, data: str,
                                                              expected: str, use_core_registry: Any,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_rewards.command_line import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    table = data if data.startswith("source") else f'source = "rows.jsonl"\n{data}'
    config = tmp_path / "run.toml"
    config.write_text(f'[model]\nname_or_path = "{tiny_model_dir}"\ndtype = "float32"\n[data]\n{table}\n'
                      f'prompt_field = "question"\nchat_template = false\n[logging]\noutput_dir = "{tmp_path / "out"}"\n'
                      '[rewards.short]\nuse = "core_len"\n')
    for argv in (["config", "validate", str(config)], ["train", str(config), "--dry-run"]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err, (argv, err)
        assert [line for line in err.splitlines() if expected in line], (argv, err)


def test_data_files_resolve_next_to_the_config_file(jsonl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    use_core_registry: Any) -> None:
    from grpo_core.config import load_config

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = tmp_path / "run.toml"
    config.write_text('[model]\nname_or_path = "gpt2"\n[data]\nsource = "json"\ndata_files = { train = "d.jsonl" }\n'
                      'prompt_field = "question"\n[rewards.short]\nuse = "core_len"\n')
    cfg = load_config(str(config))
    assert cfg.data.data_files == {"train": str(jsonl.resolve())}
    assert questions(load_rows(cfg.data)) == questions(ROWS)


def test_the_trl_backend_refuses_a_stream(jsonl: Path, tmp_path: Path, use_core_registry: Any) -> None:
    from grpo_core.config import as_run_config
    from grpo_core.trainer_backends.trl_mapping import grpo_config_kwargs
    from grpo_rewards.errors import ConfigError

    cfg = _train_cfg(Path("gpt2"), jsonl, tmp_path / "out", 2, streaming=True)
    cfg["model"]["name_or_path"] = "gpt2"
    with pytest.raises(ConfigError, match="data.streaming: the trl trainer backend trains on a datasets.Dataset"):
        grpo_config_kwargs(as_run_config(cfg))


def test_lazily_read_rows_still_join_like_the_lists_they_were(jsonl: Path) -> None:
    """``load_rows`` returned a list; code that joins two of them (as ``grpo demo`` does) keeps working."""
    d = DataConfig(source=str(jsonl), prompt_field="question", answer_field="answer")
    first, second = load_rows(d, split="train[:3]"), load_rows(d, split="train[-2:]")
    joined = first + second
    assert isinstance(joined, list) and questions(joined) == questions(ROWS[:3] + ROWS[-2:])
    assert questions([ROWS[0]] + second) == questions([ROWS[0], *ROWS[-2:]])
