"""The answer rules hold on what the trainer passes: text decoded from the policy's token ids (with the ids
beside it as the ``completion_ids`` column), not only on text written by hand."""

from __future__ import annotations

import pytest

from grpo_rewards import reward

tokenizers = pytest.importorskip("tokenizers")


def _tokenizer():
    from grpo_core.smollm2 import FOLDER, cache_dir

    path = cache_dir() / FOLDER / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"no local tokenizer at {path}")
    return tokenizers.Tokenizer.from_file(str(path))


ROWS = [  # (completion, reference, exact_match score)
    ("My first guess was that the answer was 30, but recounting the boxes the total is 36.", "36", 2.0),
    ("The answer is 12 or 13.", "12", 0.0),
    ("It is somewhere between 10 and 14.", "14", 0.0),
    ("#### 72\nchecking...\n#### 73", "73", 0.0),
    ("<answer>**12**</answer>", "12", 2.0),
    ('<answer class="final">12</answer>', "12", 2.0),
    ("Options: A: 7, B: 12, C: 15. I pick B", "12", 2.0),
    ("Options: A: 7, B: 12, C: 15. I pick B", "B", 2.0),
    ("La réponse est 14.", "14", 2.0),
    ("最终答案：14", "14", 2.0),
    ("<answer>1,23,456</answer>", "123456", 2.0),
    ("<answer>forty-two</answer>", "42", 2.0),
    ("<answer>6.02 \\times 10^{23}</answer>", "602000000000000000000000", 2.0),
]


def test_rules_hold_on_decoded_token_ids():
    tok = _tokenizer()
    ids = [tok.encode(text, add_special_tokens=False).ids for text, _, _ in ROWS]
    decoded = [tok.decode(i, skip_special_tokens=True) for i in ids]
    refs = [ref for _, ref, _ in ROWS]
    fn = reward("exact_match")
    assert fn(decoded, answer=refs, completion_ids=ids) == [score for _, _, score in ROWS]
    assert fn(decoded, answer=refs, completion_ids=ids) == fn([t for t, _, _ in ROWS], answer=refs)
