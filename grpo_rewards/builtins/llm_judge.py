"""``llm_judge``: a language model judges each completion against a rubric (:mod:`grpo_rewards.judges`);
``pairwise_judge``: it compares every two completions of a prompt, a group reward
(:mod:`grpo_rewards.judges.pairwise`).

The judge is a backend registered through ``grpo_register_judge_backends``: ``openai`` (an OpenAI-compatible
endpoint at ``base_url``: a vLLM server, a hosted API) or ``transformers`` (a local model given by path, loaded in
the training process; needs the ``train`` extra). The rubric is one ``question`` or weighted ``criteria``; the
score is the rubric's verdict mapped to ``[0, 1]``, times ``value``.
"""

from __future__ import annotations

from typing import Any

from grpo_rewards.group_reward import GroupReward
from grpo_rewards.judges.http_judge import openai_backend
from grpo_rewards.judges.pairwise import PairwiseJudge
from grpo_rewards.judges.prompt import DEFAULT_PAIR_TEMPLATE, DEFAULT_TEMPLATE
from grpo_rewards.judges.reward import LLMJudge
from grpo_rewards.judges.rubric import make_rubric
from grpo_rewards.plugins import current_registry
from grpo_rewards.specs import RewardSpec


def llm_judge(model: str, base_url: str | None = None, backend: str = "openai", question: str | None = None,
              criteria: list | None = None, scale: list | None = None, template: str | None = None,
              pattern: str | None = None, value: float = 1.0, temperature: float = 0.0, max_tokens: int = 512,
              concurrency: int = 8, request_timeout: float = 30.0, retries: int = 2, backoff: float = 0.5,
              structured: bool = False, cache_size: int = 65536, api_key_env: str = "OPENAI_API_KEY",
              device: str = "auto") -> LLMJudge:
    """A judge model scores each completion against a rubric (a question, or weighted criteria), read from its
    JSON verdict or a pattern; an OpenAI-compatible endpoint or a local transformers model."""
    rubric = make_rubric(question, criteria, scale)
    judge = _judge(model, backend, base_url, temperature, max_tokens, request_timeout, retries, backoff, api_key_env,
                   device)
    return LLMJudge(judge, rubric, template=template or DEFAULT_TEMPLATE, pattern=pattern, value=value,
                    sampling={"temperature": temperature, "max_tokens": max_tokens}, concurrency=concurrency,
                    structured=structured, cache_size=cache_size)


def _judge(model: str, backend: str, base_url: str | None, temperature: float, max_tokens: int,
           request_timeout: float, retries: int, backoff: float, api_key_env: str, device: str) -> Any:
    """The judge the reward asks: ``backend``'s factory (``grpo_register_judge_backends``) with the options."""
    if max_tokens < 1 or temperature < 0:
        raise ValueError("max_tokens must be >= 1 and temperature >= 0")
    factory = current_registry().get("judge_backends", backend)
    return factory(model, base_url=base_url, timeout=request_timeout, retries=retries, backoff=backoff,
                   api_key_env=api_key_env, device=device)


def pairwise_judge(model: str, base_url: str | None = None, backend: str = "openai",
                   question: str = "Which completion answers the prompt better?", criteria: list | None = None,
                   template: str | None = None, both_orders: bool = True, value: float = 1.0,
                   temperature: float = 0.0, max_tokens: int = 512, concurrency: int = 8,
                   request_timeout: float = 30.0, retries: int = 2, backoff: float = 0.5, structured: bool = False,
                   cache_size: int = 65536, api_key_env: str = "OPENAI_API_KEY", device: str = "auto") -> GroupReward:
    """A judge compares every two completions of a prompt (both orders); each scores its share of wins, times
    ``value`` (a group reward)."""
    rubric = make_rubric(None if criteria else question, criteria, None)
    judge = _judge(model, backend, base_url, temperature, max_tokens, request_timeout, retries, backoff, api_key_env,
                   device)
    return GroupReward(PairwiseJudge(judge, rubric, template=template or DEFAULT_PAIR_TEMPLATE, both_orders=both_orders,
                                     value=value, sampling={"temperature": temperature, "max_tokens": max_tokens},
                                     concurrency=concurrency, structured=structured, cache_size=cache_size),
                       name="pairwise_judge")


def _openai(model: str, base_url: str | None = None, timeout: float = 30.0, retries: int = 2, backoff: float = 0.5,
            api_key_env: str = "OPENAI_API_KEY", device: str = "auto") -> Any:
    del device  # a server places its own model
    return openai_backend(model, base_url, timeout=timeout, retries=retries, backoff=backoff, api_key_env=api_key_env)


JUDGE_BACKENDS = {"openai": _openai}


REWARD_SPECS = [
    RewardSpec(
        name="llm_judge",
        factory=llm_judge,
        example='''[rewards.helpful]
use = "llm_judge"
weight = 0.5
model = "Qwen/Qwen2.5-7B-Instruct"          # the judge: served by vLLM (`vllm serve ...`) or any OpenAI-compatible API
base_url = "http://localhost:8000/v1"
criteria = [{ name = "correct", weight = 2, description = "The final answer is right." },
            { name = "clear", weight = 1, description = "The reasoning is easy to follow." }]
scale = [0, 10]          # the judge answers {"scores": {"correct": n, "clear": n}}; the reward is their weighted mean in [0, 1]
concurrency = 8          # requests in flight
request_timeout = 30.0   # seconds per request; retries x request_timeout stays below the reward's timeout
retries = 2
structured = true        # ask the server for JSON in the verdict's schema (vLLM: response_format)
''',
    ),
    RewardSpec(
        name="pairwise_judge",
        factory=pairwise_judge,
        example='''[rewards.preferred]
use = "pairwise_judge"   # a group reward: every two completions of a prompt compared, in both orders
weight = 0.5
model = "Qwen/Qwen2.5-7B-Instruct"
base_url = "http://localhost:8000/v1"
question = "Which completion solves the problem more clearly and correctly?"
concurrency = 16         # k completions cost k (k - 1) requests per prompt
''',
    ),
]
