"""``llm_judge`` with the ``transformers`` backend: a tiny causal model built from a config and saved to a folder
is the judge. Its replies are those of ``generate`` called by hand on the judge's messages, the verdicts read from
them (a random model rarely writes one: parse failures are counted, and no claim is made about its quality), and
the reward runs on a thread of this process (the model is not shipped to a worker)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_a_local_transformers_judge(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_rewards import SafeReward, reward
    from grpo_rewards.judges.verdict import read_verdict

    fn = reward("llm_judge", backend="transformers", model=str(tiny_model_dir), question="Is it right?",
                max_tokens=12, device="cpu", pattern=r"(\d+)")
    completions = ["The answer is 19.", "19", "I do not know."]
    scores = fn(completions, prompts=["What is 12 plus 7?"] * 3)

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    expected = []
    for c in completions:
        ids = tok.apply_chat_template(fn.messages("What is 12 plus 7?", c), add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)
        reply = tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
        verdict = read_verdict(reply, fn._pattern)
        expected.append(None if verdict is None else fn.rubric.score(verdict))
    assert scores == expected
    m = fn.metrics()
    assert m["judgements"] == 3 and m["parse_failure_rate"] == sum(s is None for s in expected) / 3
    assert fn.judge.identity == f"transformers:{tiny_model_dir}"
    again = reward("llm_judge", backend="transformers", model=str(tiny_model_dir), question="Other?", device="cpu")
    assert again.judge.model is fn.judge.model  # one loaded model per (model, device)
    assert SafeReward(fn).isolation == "thread"
