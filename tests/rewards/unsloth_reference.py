"""The Unsloth GSM8K GRPO notebooks' reward functions, transcribed as test oracles.

Our built-ins must reproduce these term for term where their docs say they do.
(Llama-3.1 8B GRPO notebook: correctness/int/strict/soft/xmlcount; Qwen3 GRPO
notebook: check_answer's tiered ratio rule, match_format_exactly, match_format_approximately.)
"""

import re


def extract_xml_answer(text: str) -> str:
    answer = text.split("<answer>")[-1]
    answer = answer.split("</answer>")[0]
    return answer.strip()


def correctness(response: str, answer: str) -> float:
    return 2.0 if extract_xml_answer(response) == answer else 0.0


def int_reward(response: str) -> float:
    return 0.5 if extract_xml_answer(response).isdigit() else 0.0


def strict_format(response: str) -> float:
    pattern = r"^<reasoning>\n.*?\n</reasoning>\n<answer>\n.*?\n</answer>\n$"
    return 0.5 if re.match(pattern, response) else 0.0


def soft_format(response: str) -> float:
    pattern = r"<reasoning>.*?</reasoning>\s*<answer>.*?</answer>"
    return 0.5 if re.match(pattern, response) else 0.0


def count_xml(text: str) -> float:
    count = 0.0
    if text.count("<reasoning>\n") == 1:
        count += 0.125
    if text.count("\n</reasoning>\n") == 1:
        count += 0.125
    if text.count("\n<answer>\n") == 1:
        count += 0.125
        count -= len(text.split("\n</answer>\n")[-1]) * 0.001
    if text.count("\n</answer>") == 1:
        count += 0.125
        count -= (len(text.split("\n</answer>")[-1]) - 1) * 0.001
    return count


def check_answer(guess: str | None, true_answer: str) -> float:
    """Qwen3 notebook's check_answer, for one (extracted guess, reference) pair."""
    if guess is None:
        return -2.0
    score = 0.0
    if guess == true_answer:
        score += 5.0
    elif guess.strip() == true_answer.strip():
        score += 3.5
    else:
        try:
            ratio = float(guess) / float(true_answer)
            if ratio >= 0.9 and ratio <= 1.1:
                score += 2.0
            elif ratio >= 0.8 and ratio <= 1.2:
                score += 1.5
            else:
                score -= 2.5
        except Exception:
            score -= 4.5
    return score


# Qwen3 GRPO notebook: its markers, match_format (tokenizer.eos_token of Qwen3 is "<|endoftext|>") and the two
# format rewards, for one completion text
QWEN3_EOS = "<|endoftext|>"
QWEN3_MATCH_FORMAT = re.compile(
    r"<end_working_out>.*?<SOLUTION>(.+?)</SOLUTION>[\s]{0,}" + "(?:" + re.escape(QWEN3_EOS) + ")?" + r"[\s]{0,}$",
    flags=re.MULTILINE | re.DOTALL,
)


def match_format_exactly(response: str) -> float:
    return 3.0 if QWEN3_MATCH_FORMAT.search(response) is not None else 0.0


def match_format_approximately(response: str) -> float:
    score = 0.0
    score += 0.5 if response.count("<end_working_out>") == 1 else -1.0
    score += 0.5 if response.count("<SOLUTION>") == 1 else -1.0
    score += 0.5 if response.count("</SOLUTION>") == 1 else -1.0
    return score
