"""Judges: rewards that ask a language model for a verdict (the ``llm_judge`` built-in).

One owner per part: :mod:`~grpo_rewards.judges.rubric` (what is judged: weighted criteria or one question, and
how the verdict becomes a score), :mod:`~grpo_rewards.judges.prompt` (the judge's prompt, with the untrusted
prompt and completion escaped into exactly one span each), :mod:`~grpo_rewards.judges.verdict` (the score read
from the judge's output, and only from it), :mod:`~grpo_rewards.judges.http_judge` (an OpenAI-compatible endpoint:
timeout, retries with backoff), :mod:`~grpo_rewards.judges.reward` (the reward: concurrency, cache, metrics),
:mod:`~grpo_rewards.judges.scripted` and :mod:`~grpo_rewards.judges.probes` (a local endpoint that obeys any
injection reaching it, and the prompt-injection probes ``grpo rewards check`` runs against it).
A judge backend is registered through ``grpo_register_judge_backends``: ``openai`` here, ``transformers`` (a
local model) by the trainer's plugin.
"""
