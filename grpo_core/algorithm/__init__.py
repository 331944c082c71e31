"""The GRPO algorithm on tensors: no model, no process group, no run folder.

``advantages``          group-relative advantages from a step's rewards
``loss``                the clipped policy loss, its KL term and its aggregation over tokens
``sampler_correction``  the importance ratio between the sampler and the policy (vLLM batches)
"""
