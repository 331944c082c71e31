"""The built-in verifiers run the verifier suite third-party verifiers run: numbers in every form the number
grammar reads, judged equal exactly when their values are."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from grpo_rewards.testing import VerifierConformance
from grpo_rewards.testing import strategies as gs


class _Numbers(VerifierConformance):
    values = gs.numbers()
    symmetric = True

    def render(self, value: Fraction) -> st.SearchStrategy[str]:
        return gs.renderings(value)

    def oracle(self, answer: Fraction, reference: Fraction) -> bool:
        return answer == reference


class TestExact(_Numbers):
    verifier_name = "exact"


class TestNumeric(_Numbers):
    verifier_name = "numeric"


class TestMath(_Numbers):
    verifier_name = "math"
