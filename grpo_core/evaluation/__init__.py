"""Evaluating a model on a dataset with a rewards file (``grpo eval``): the statistics (:mod:`.stats`) and
the sampling and scoring of every prompt (:mod:`.run`)."""
