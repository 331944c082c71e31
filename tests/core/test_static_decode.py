"""The group sampler's decode modes on tiny models: the static cache (eager; the CUDA-graph replay needs a GPU)
draws the dynamic path's tokens with its log-probs, for left-padded prompts of different lengths, groups
finishing at different steps, shared and per-row prefill; a cache that cannot be shared (a hybrid model's
linear-attention layers) falls back to prefilling each row; ``[generation] decode`` resolves and is checked."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from grpo_core.generation import group_sampling  # noqa: E402
from grpo_core.generation.group_sampling import UNSHARED_FLAG, sample_groups  # noqa: E402
from grpo_rewards.errors import UserError  # noqa: E402

EOS = list(range(40, 70))  # 30 of 300 ids end a completion: rows end at different steps, some run to the end
PROMPTS = ["What is 12 plus 7?", "Natalia sold clips", "The answer is"]


def _llama(model_dir, attn: str = "sdpa"):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation=attn).eval()
    tok = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    enc = tok(PROMPTS, return_tensors="pt", padding=True)
    assert len(set(enc["attention_mask"].sum(1).tolist())) == 3  # three prompt lengths, left-padded
    return model, tok, enc


def _sample(model, tok, enc, seed: int, **kwargs):
    torch.manual_seed(seed)
    kwargs = {"max_new_tokens": 24, "eos_ids": EOS, "pad_id": tok.pad_token_id, "temperature": 0.8, **kwargs}
    return sample_groups(model, enc["input_ids"], enc["attention_mask"], 4, **kwargs)


def _lengths(ids: torch.Tensor) -> list[int]:
    ended = torch.isin(ids, torch.tensor(EOS))
    return [int(row.int().argmax()) + 1 if row.any() else ids.size(1) for row in ended]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("shared", [True, False])
def test_static_cache_draws_the_dynamic_tokens_and_log_probs(tiny_model_dir, attn, shared):
    model, tok, enc = _llama(tiny_model_dir, attn)
    if not shared:
        setattr(model, UNSHARED_FLAG, True)  # each row prefilled, as for a cache that cannot be shared
    for seed in (0, 1):
        ids, logps = _sample(model, tok, enc, seed)
        after_dynamic = torch.rand(1)
        ids_s, logps_s = _sample(model, tok, enc, seed, decode="static", strict=True)
        after_static = torch.rand(1)
        lengths = _lengths(ids)
        assert len(set(lengths)) >= 3 and min(lengths) < 24  # rows end at different steps (some truncated)
        assert torch.equal(ids_s, ids)
        torch.testing.assert_close(logps_s, logps, atol=2e-5, rtol=0)
        assert torch.equal(after_static, after_dynamic)  # the global generator moved the same way
        done = torch.arange(ids.size(1)).expand_as(ids) >= torch.tensor(lengths).unsqueeze(1)
        assert (ids_s[done] == tok.pad_token_id).all() and (logps_s[done] == 0).all()


def test_shared_prefill_draws_what_prefilling_each_row_draws(tiny_model_dir):
    model, tok, enc = _llama(tiny_model_dir)
    shared = _sample(model, tok, enc, 3)
    setattr(model, UNSHARED_FLAG, True)
    each = _sample(model, tok, enc, 3)
    assert torch.equal(shared[0], each[0])
    torch.testing.assert_close(shared[1], each[1], atol=2e-5, rtol=0)


def test_greedy_static_decoding_is_generates_and_draws_nothing(tiny_model_dir):
    model, tok, enc = _llama(tiny_model_dir)
    want = model.generate(**enc, do_sample=False, max_new_tokens=12, pad_token_id=tok.pad_token_id,
                          eos_token_id=tok.eos_token_id)[:, enc["input_ids"].size(1):]
    rng = torch.random.get_rng_state()
    got, logps = sample_groups(model, enc["input_ids"], enc["attention_mask"], 2, max_new_tokens=12,
                               eos_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, greedy=True, decode="static",
                               strict=True)
    assert torch.equal(torch.random.get_rng_state(), rng)  # greedy draws nothing (evaluation leaves training alone)
    assert torch.equal(got[:, :want.size(1)], want.repeat_interleave(2, dim=0)[:, :got.size(1)])
    assert (logps <= 0).all()


@pytest.mark.parametrize("check_every", [1, 5])
def test_static_path_hands_over_finished_groups_as_they_are_seen(tiny_model_dir, check_every):
    """Every row ends before the last step: the batch is as wide as its longest row, as the dynamic path's,
    whatever step the end was seen at; each handed-over part as wide as its own longest row."""
    model, tok, enc = _llama(tiny_model_dir)
    ids, logps = _sample(model, tok, enc, 0, decode="static", max_new_tokens=60)
    assert ids.size(1) == max(_lengths(ids)) < 60
    assert torch.equal(ids, _sample(model, tok, enc, 0, max_new_tokens=60)[0])
    parts = []

    def on_groups(part_ids, part_logps, first, end, width):
        parts.append((first, end, part_ids[first * 4:end * 4, :width].clone(), part_logps[first * 4:end * 4, :width].clone()))

    ids2, logps2 = _sample(model, tok, enc, 0, decode="static", on_groups=on_groups, check_every=check_every,
                           max_new_tokens=60)
    assert torch.equal(ids, ids2) and torch.equal(logps, logps2)
    assert [p[0] for p in parts] == [0] + [p[1] for p in parts[:-1]] and parts[-1][1] == 3
    for first, end, part_ids, part_logps in parts:
        width = part_ids.size(1)
        assert width == max(_lengths(ids[first * 4:end * 4]))  # never wider than the batch (the trainer checks it)
        assert torch.equal(ids[first * 4:end * 4, :width], part_ids)
        assert torch.equal(logps[first * 4:end * 4, :width], part_logps)
        assert (ids[first * 4:end * 4, width:] == tok.pad_token_id).all()


def test_a_failed_graph_capture_runs_the_steps_eagerly(tiny_model_dir, monkeypatch):
    """The capture itself needs CUDA; where it fails the rollout runs eagerly (a notice), the same draw."""
    from grpo_core.generation.static_decode import StaticStep

    def refuse(self):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(StaticStep, "_capture", refuse)
    monkeypatch.setattr(group_sampling, "_noticed", set())
    model, tok, enc = _llama(tiny_model_dir)
    want = _sample(model, tok, enc, 5, decode="static")
    with pytest.warns(UserWarning, match="could not be captured as a CUDA graph"):
        got = _sample(model, tok, enc, 5, decode="cuda_graph")
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    with pytest.raises(RuntimeError, match="stream is capturing"):
        _sample(model, tok, enc, 5, decode="cuda_graph", strict=True)


@pytest.fixture(scope="module")
def hybrid():
    """A tiny LFM2 (a short-convolution layer, then an attention layer): its cache's conv layer has neither
    batch_repeat_interleave nor batch_select_indices."""
    from transformers import Lfm2Config, Lfm2ForCausalLM

    from tests.core.conftest import build_tokenizer

    tok = build_tokenizer()
    tok.padding_side = "left"
    torch.manual_seed(0)
    config = Lfm2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, layer_types=["conv", "full_attention"],
                        max_position_embeddings=128, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                        bos_token_id=tok.bos_token_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = Lfm2ForCausalLM(config).eval()
    return model, tok, tok(PROMPTS, return_tensors="pt", padding=True)


def test_a_cache_that_cannot_be_shared_prefills_each_row(hybrid, monkeypatch):
    model, tok, enc = hybrid
    monkeypatch.setattr(group_sampling, "_noticed", set())
    monkeypatch.delattr(model, UNSHARED_FLAG, raising=False)
    with pytest.warns(UserWarning, match=r"cannot be shared by a group .*batch_repeat_interleave") as caught:
        first = _sample(model, tok, enc, 0)
    assert len([w for w in caught if "cannot be shared" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # noticed once: the model now prefills each row directly
        again = _sample(model, tok, enc, 0)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert len(set(_lengths(first[0]))) >= 2
    # greedy, rows kept in the batch (its cache cannot drop them either): model.generate's tokens
    want = model.generate(**enc, do_sample=False, max_new_tokens=10, pad_token_id=tok.pad_token_id,
                          eos_token_id=EOS)[:, enc["input_ids"].size(1):]
    got, _ = sample_groups(model, enc["input_ids"], enc["attention_mask"], 2, max_new_tokens=10, eos_ids=EOS,
                           pad_id=tok.pad_token_id, greedy=True)
    want = want.repeat_interleave(2, dim=0)
    for row_got, row_want, n in zip(got, want, _lengths(want), strict=True):
        assert row_got[:n].tolist() == row_want[:n].tolist()


def test_a_model_the_static_cache_cannot_serve_decodes_dynamically(hybrid, monkeypatch):
    model, tok, enc = hybrid
    monkeypatch.setattr(group_sampling, "_noticed", set())
    want = _sample(model, tok, enc, 2)
    with pytest.warns(UserWarning, match=r'decode = "static" cannot serve this model \(layer types'):
        got = _sample(model, tok, enc, 2, decode="static")
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    with pytest.raises(UserError, match=r'generation.decode = "static" cannot serve this model: layer types'):
        _sample(model, tok, enc, 2, decode="static", strict=True)


def test_decode_setting_resolves_per_device(tiny_model_dir, tmp_path, use_core_registry):
    from grpo_core.config import ConfigError, config_from_dict
    from grpo_core.generation.transformers_backend import TransformersBackend, resolve_decode

    cuda = type("P", (), {"device": torch.device("cuda", 0)})()
    fake = type("M", (), {"parameters": lambda self: iter([cuda])})()
    assert resolve_decode("auto", fake) == ("cuda_graph", False)
    assert resolve_decode("static", fake) == ("static", True)
    model, tok, _ = _llama(tiny_model_dir)
    assert resolve_decode("auto", model) == ("dynamic", False)
    with pytest.raises(UserError, match='"cuda_graph" needs a CUDA device'):
        resolve_decode("cuda_graph", model)
    base = {"model": {"name_or_path": str(tiny_model_dir)}, "data": {"source": "hub/name"},
            "rewards": {"len": {"use": "core_len"}}}
    with pytest.raises(ConfigError, match=r"generation.decode"):
        config_from_dict({**base, "generation": {"decode": "graph"}})
    cfg = config_from_dict({**base, "generation": {"decode": "static", "decode_check_every": 3}})
    backend = TransformersBackend(cfg, model, tok)
    assert (backend.decode, backend.decode_strict) == ("static", True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA-graph replay needs a CUDA device")
@pytest.mark.parametrize("autocast", [False, True])
def test_cuda_graph_replay_draws_the_static_and_dynamic_tokens(tiny_model_dir, autocast):
    """On CUDA: the captured step (strict: a failed capture raises) gives the eager static step's tokens and
    log-probs, and the dynamic path's tokens; under bf16 autocast too (the weight-cast cache off in capture)."""
    model, tok, enc = _llama(tiny_model_dir)
    model, enc = model.cuda(), {key: value.cuda() for key, value in enc.items()}
    context = torch.autocast("cuda", dtype=torch.bfloat16) if autocast else torch.autocast("cuda", enabled=False)
    with context:
        dynamic = _sample(model, tok, enc, 0)
        static = _sample(model, tok, enc, 0, decode="static", strict=True)
        graph = _sample(model, tok, enc, 0, decode="cuda_graph", strict=True)
    assert torch.equal(graph[0], static[0])  # the same kernels replayed (cuBLAS may tile differently: logps close)
    torch.testing.assert_close(graph[1], static[1], atol=2e-2 if autocast else 1e-5, rtol=0)
    assert torch.equal(graph[0], dynamic[0]) or autocast  # bf16 rounding may flip a near tie across paths
    assert len(set(_lengths(graph[0].cpu()))) >= 2
