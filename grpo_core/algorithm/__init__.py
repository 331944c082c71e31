"""The GRPO algorithm on tensors: no model, no process group, no run folder.

``advantages``          group-relative advantages from a step's rewards
``loss``                the policy loss: the importance ratio, the KL term, a loss type's surrogate and normaliser
``loss_types``          the loss types (``[grpo] loss_type``): the interface and the built-ins
``sampler_correction``  the importance ratio between the sampler and the policy (vLLM batches)
"""
