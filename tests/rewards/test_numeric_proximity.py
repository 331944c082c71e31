"""numeric_proximity: smooth closeness reward, and Unsloth's tiered ratio rule."""

import pytest

from grpo_rewards.builtins.numeric_proximity import TIERS, numeric_proximity

from . import unsloth_reference as unsloth


def score(answers, reference, **params):
    return numeric_proximity(**params)([f"<answer>{a}</answer>" for a in answers], answer=[reference] * len(answers))


def test_closer_scores_more():
    s = score(["10", "9", "11", "3", "-10", "1000"], "10")
    assert s[0] == 1.0
    assert s[1] == pytest.approx(0.5) and s[2] == pytest.approx(0.5)  # 10% off: half the value
    assert s[1] > s[3] > s[4] > 0 and s[3] > s[5] > 0  # 9 for 10 beats 3
    assert s[3] == pytest.approx(1 / (1 + 49))


def test_smooth_parameters():
    assert score(["9"], "10", value=2.0) == [pytest.approx(1.0)]
    assert score(["8"], "10", tolerance=0.2) == [pytest.approx(0.5)]
    # against 0 the error is absolute, so 0.1 is not "infinitely" wrong; every other reference's is relative
    assert score(["0.1"], "0", tolerance=0.1) == [pytest.approx(0.5)]
    assert score(["0.45"], "0.5") == [pytest.approx(0.5)]
    assert score(["0"], "0") == [1.0]
    assert score(["1e400"], "1") == [0.0]  # astronomically far: underflows to 0, never raises
    assert score(["1.05e400"], "1e400") == [pytest.approx(0.8)]  # beyond floats, the ratio is still right


def test_missing_unparsable_and_undecided():
    fn = numeric_proximity()
    c = ["no number here", "<answer>several</answer>", "<answer>7</answer>", "<answer>7</answer>"]
    assert fn(c, answer=["7", "7", "Paris", None]) == [0.0, 0.0, None, None]
    assert numeric_proximity(missing_value=-1.0)(c[:2], answer=["7", "7"]) == [-1.0, -1.0]
    # the reference can be a full GSM8K solution
    assert fn(["<answer>1,080</answer>"], answer=["... so 1080 in all.\n#### 1,080"]) == [1.0]


@pytest.mark.parametrize(
    "guess, reference",
    [("10", "10"), ("9", "10"), ("11", "10"), ("8.5", "10"), ("12", "10"), ("7", "10"), ("13", "10"),
     ("-9", "-10"), ("100", "10"), ("abc", "10"), ("0.9", "1"), ("1.2", "1"), ("0.79", "1")],
)
def test_tiered_mode_is_unsloth_check_answer(guess, reference):
    assert score([guess], reference, mode="tiered") == [unsloth.check_answer(guess, reference)]


def test_tiered_deliberate_differences():
    # numeric equality: the notebook's float("1,080") fails and scores -4.5
    assert unsloth.check_answer("1,080", "1080") == -4.5
    assert score(["1,080"], "1080", mode="tiered") == [5.0]
    # a wrong answer to reference 0: the notebook divides by zero (-4.5); here it is simply far
    assert unsloth.check_answer("3", "0") == -4.5
    assert score(["3"], "0", mode="tiered") == [TIERS["far"]]
    # no answer at all
    assert numeric_proximity(mode="tiered")(["nothing"], answer=["5"]) == [unsloth.check_answer(None, "5")]


def test_tier_overrides():
    gemma = {"exact": 3.0, "near": 0.5, "close": 0.25, "far": -1.0, "unparsable": -0.5}
    s = score(["10", "9.5", "8.5", "1", "x"], "10", mode="tiered", tiers=gemma, missing_value=0.0)
    assert s == [3.0, 0.5, 0.25, -1.0, -0.5]
    assert numeric_proximity(mode="tiered", missing_value=0.0)(["none"], answer=["1"]) == [0.0]
    assert score(["10"], "10", mode="tiered", tiers={"exact": 1}) == [1.0]


@pytest.mark.parametrize(
    "params, message",
    [
        ({"mode": "linear"}, "unknown mode 'linear'"),
        ({"tolerance": 0}, "tolerance must be positive"),
        ({"tiers": {"exact": 1.0}}, "only used with mode = 'tiered'"),
        ({"mode": "tiered", "tiers": {"exakt": 1.0}}, "unknown tier 'exakt'"),
        ({"mode": "tiered", "tiers": {"exact": "a lot"}}, "tier 'exact' must be a number"),
        ({"extract": "nope"}, "unknown extract method"),
        ({"reference_extract": "nope"}, "unknown reference_extract"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        numeric_proximity(**params)


def test_toml_inline_tiers(tmp_path):
    from grpo_rewards import load_rewards

    cfg = tmp_path / "r.toml"
    cfg.write_text('[rewards.close]\nuse = "numeric_proximity"\nmode = "tiered"\ntiers = { exact = 3.0, far = -1.0 }\n')
    assert load_rewards(str(cfg))(["<answer>5</answer>", "<answer>50</answer>"], answer=["5", "5"]) == [3.0, -1.0]
