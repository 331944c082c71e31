"""What a TRL user and transformers' callbacks touch on ``grpo_core.GRPOTrainer``: ``callbacks=``/``add_callback``
with transformers' ``TrainerCallback`` events (``control.should_training_stop`` honoured), ``state.log_history``
in TRL's metric names, ``train()`` returning a ``TrainOutput``, ``save_model``, ``evaluate`` (a dict of eval
sets too), TRL's reward keywords (``log_metric``, ``log_extra``, ``trainer_state``; async rewards awaited, in a
worker process too), a reward's failure naming the user's file and line, an earlier run refused before the
model loads in Python's words, and the header and last line a ``grpo train`` prints."""

from __future__ import annotations

import json
import logging
import os
import signal

import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")
datasets = pytest.importorskip("datasets")

from api_rewards import async_logging_reward  # noqa: E402  (module level: its own process)
from transformers import TrainerCallback  # noqa: E402
from transformers.trainer_utils import TrainOutput  # noqa: E402

from grpo_rewards.errors import UserError  # noqa: E402
from tests.core.conftest import arithmetic_rows  # noqa: E402


def _config(out, **kw):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return trl.GRPOConfig(**{"output_dir": str(out), "use_cpu": True, "report_to": "none", "learning_rate": 0.01,
                                 "per_device_train_batch_size": 4, "num_generations": 2, "max_completion_length": 4,
                                 "max_steps": 4, "logging_steps": 1, "model_init_kwargs": {"dtype": "float32"},
                                 "disable_tqdm": True, "save_strategy": "no", **kw})


def _ds(n=12):
    return datasets.Dataset.from_list(arithmetic_rows(40)[:n])


class Recorder(TrainerCallback):
    def __init__(self, stop_at=None):
        self.events, self.stop_at, self.logs = [], stop_at, []

    def __getattribute__(self, name):
        if name.startswith("on_") and name != "on_log":
            def record(args, state, control, **kw):
                self.events.append((name, state.global_step))
                if name == "on_step_end" and self.stop_at and state.global_step >= self.stop_at:
                    control.should_training_stop = True
                return control
            return record
        return super().__getattribute__(name)

    def on_log(self, args, state, control, logs=None, **kw):
        self.events.append(("on_log", state.global_step))
        self.logs.append(dict(logs))


def length(completions, **kw):
    return [float(len(c)) for c in completions]


def test_callbacks_state_and_train_output(arithmetic_model_dir, tmp_path, capsys):
    from grpo_core import GRPOTrainer

    rec, later = Recorder(stop_at=2), Recorder()
    trainer = GRPOTrainer(model=str(arithmetic_model_dir), reward_funcs=length, args=_config(tmp_path / "run"),
                          train_dataset=_ds(), callbacks=[rec])
    trainer.add_callback(later)
    assert trainer.processing_class is trainer.tokenizer and trainer.reward_func_names == ["length"]
    assert trainer.reward_funcs == [length]
    out = trainer.train()
    assert isinstance(out, TrainOutput) and out.global_step == 2 and out["step"] == 2  # stopped by the callback
    names = [e for e, _ in rec.events]
    assert names[0] == "on_train_begin" and names[-1] == "on_train_end"
    assert [s for e, s in rec.events if e == "on_step_end"] == [1, 2] and "on_save" in names
    assert names.count("on_step_begin") == 2 and later.events == rec.events
    history = trainer.state.log_history
    assert {"loss", "reward", "reward_std", "rewards/length/mean", "completions/mean_length", "learning_rate",
            "step"} <= set(history[0])
    assert [h["step"] for h in history] == [1, 2, 2] and history[-1]["train_loss"] == out.training_loss
    assert out.training_loss == pytest.approx(sum(h["loss"] for h in history[:2]) / 2)
    assert rec.logs[0] == {k: v for k, v in history[0].items() if k != "step"}
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert history[1]["reward"] == metrics[1]["reward/mean"]  # the same numbers under TRL's names
    err = capsys.readouterr().err
    assert f"GRPOTrainer: <GRPOConfig>: model {arithmetic_model_dir}" in err and f"run folder {tmp_path / 'run'}" in err
    assert f"stopped at step 2 (control.should_training_stop): {tmp_path / 'run'}" in err
    assert "FutureWarning" not in err

    trainer.save_model(tmp_path / "saved")
    assert (tmp_path / "saved" / "config.json").is_file() and (tmp_path / "saved" / "tokenizer_config.json").is_file()
    evals = trainer.evaluate(eval_dataset={"a": _ds(3), "b": arithmetic_rows(40)[5:7]})
    assert {"eval_a_reward", "eval_b_reward", "eval_a_rewards/length/mean", "eval_b_completions/mean_length"} <= \
        set(evals)
    single = trainer.evaluate(eval_dataset=_ds(3))
    assert single["eval_reward"] == evals["eval_a_reward"]  # greedy: the same rows score the same


def test_an_earlier_run_is_refused_before_the_model_loads(arithmetic_model_dir, tmp_path, monkeypatch):
    import grpo_core.trainer
    from grpo_core import GRPOTrainer

    GRPOTrainer(model=str(arithmetic_model_dir), reward_funcs=length, args=_config(tmp_path / "run", max_steps=1),
                train_dataset=_ds()).train()
    with monkeypatch.context() as m, pytest.raises(UserError) as info:
        m.setattr(grpo_core.trainer, "load_model_and_tokenizer", lambda cfg: pytest.fail("the model loaded"))
        GRPOTrainer(model=str(arithmetic_model_dir), reward_funcs=length,
                    args=_config(tmp_path / "run", max_steps=1), train_dataset=_ds())
    assert str(info.value) == (f"GRPOTrainer: output_dir: {tmp_path / 'run'} holds an earlier run (checkpoint at step 1, "
                               f"metrics.jsonl): continue it with GRPOTrainer(..., resume=True), replace it with "
                               f"overwrite=True, or pass another output_dir")
    assert "--overwrite" not in str(info.value)
    again = GRPOTrainer(model=str(arithmetic_model_dir), reward_funcs=length,
                        args=_config(tmp_path / "run", max_steps=1), train_dataset=_ds(), overwrite=True)
    assert again.train().global_step == 1
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 1


def test_trl_reward_keywords_async_and_where_a_reward_fails(arithmetic_model_dir, tmp_path, caplog):
    from grpo_core import GRPOTrainer

    states = []

    async def closure_async(completions, trainer_state, log_metric, **kw):  # a thread, awaited
        states.append(trainer_state.global_step)
        log_metric("half", 0.5)
        return [1.0] * len(completions)

    def broken(completions, **kw):
        raise ValueError("bad reward")  # the line a failure must name

    line = broken.__code__.co_firstlineno + 1
    trainer = GRPOTrainer(model=str(arithmetic_model_dir),
                          reward_funcs=[async_logging_reward, closure_async, broken],
                          args=_config(tmp_path / "run", max_steps=2), train_dataset=_ds())
    assert trainer.cfg.rewards.entries[0].fn.isolation == "process"
    with caplog.at_level(logging.WARNING, logger="grpo.rewards"):
        trainer.train()
    assert states == [0, 1]
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[0]["rewards/closure_async/half"] == 0.5 and metrics[0]["rewards/closure_async"] == 1.0
    assert metrics[0]["rewards/async_logging_reward/mean_chars"] >= 0  # from the worker process
    assert "rewards/async_logging_reward/extra/chars" in metrics[0]
    assert metrics[0]["rewards/async_logging_reward"] is not None
    failure = next(r.getMessage() for r in caplog.records if "'broken'" in r.getMessage())
    assert f"{__file__}:{line}" in failure and "api.py" not in failure


def test_an_interrupt_says_stopped(arithmetic_model_dir, tmp_path, capsys):
    from grpo_core import GRPOTrainer

    class Interrupt(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 1:
                os.kill(os.getpid(), signal.SIGINT)

    out = GRPOTrainer(model=str(arithmetic_model_dir), reward_funcs=length, args=_config(tmp_path / "run"),
                      train_dataset=_ds(), callbacks=[Interrupt]).train()
    assert out["interrupted"] and out.global_step == 1
    assert f"stopped at step 1 (interrupted): {tmp_path / 'run'}" in capsys.readouterr().err


def test_chat_template_kwargs_and_generation_kwargs_pass_through(tiny_model_dir, tmp_path):
    """Qwen3's enable_thinking reaches the chat template; generate() gets generation_kwargs (min_new_tokens)."""
    from transformers import AutoTokenizer

    from grpo_core import GRPOTrainer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>{% if enable_thinking is defined and not "
                         "enable_thinking %}<answer>{% endif %}{% endif %}")
    rows = [{"prompt": [{"role": "user", "content": f"What is {i} plus 7?"}]} for i in range(4)]
    args = _config(tmp_path / "run", max_steps=1, max_completion_length=3, model_init_kwargs={"dtype": "float32"},
                   chat_template_kwargs={"enable_thinking": False}, generation_kwargs={"min_new_tokens": 3})
    trainer = GRPOTrainer(model=str(tiny_model_dir), processing_class=tok, reward_funcs=length, args=args,
                          train_dataset=datasets.Dataset.from_list(rows))
    assert trainer.cfg.data.chat_template is True  # conversational rows: the template, as TRL applies it
    assert all(trainer.prompts[i].endswith("<|assistant|><answer>") for i in range(len(rows)))
    assert trainer.backend.generation_kwargs == {"min_new_tokens": 3}
    batch = trainer.backend.generate([trainer.prompts[0]], 4)
    assert batch.completion_mask.sum(1).tolist() == [3, 3, 3, 3]  # no EOS before the third token
