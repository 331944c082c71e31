"""grpo_core.parallel.distributed's pure parts: the world from torchrun's environment, each rank's share of a step,
the problems a config has on N processes; and the trainer's weighted reduction of per-rank metrics."""

from __future__ import annotations

from typing import Any

import pytest

from grpo_core.config import config_from_dict
from grpo_core.parallel.distributed import SINGLE, World, share, world_from_env, world_problems
from grpo_core.trainer import reduce_weighted


def test_the_world_comes_from_torchruns_environment() -> None:
    assert world_from_env({}) is SINGLE and not SINGLE.enabled and SINGLE.is_main
    assert world_from_env({"WORLD_SIZE": "1", "RANK": "0"}) is SINGLE
    world = world_from_env({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert world == World(rank=3, size=4, local_rank=1, local_size=2)
    assert world.enabled and not world.is_main


@pytest.mark.parametrize("n, size", [(24, 2), (24, 3), (8, 8), (7, 3), (2, 4)])
def test_the_shares_cover_the_step_in_order_once(n: int, size: int) -> None:
    shares = [share(n, World(rank=r, size=size)) for r in range(size)]
    assert [i for s in shares for i in range(n)[s]] == list(range(n))  # contiguous, in rank order, no overlap
    lengths = [s.stop - s.start for s in shares]
    assert max(lengths) - min(lengths) <= 1


def test_the_rows_of_a_step_do_not_depend_on_the_number_of_processes() -> None:
    rows = list(range(100, 112))  # a step's rows in the seeded order
    for size in (1, 2, 3, 4, 6):
        assert [r for rank in range(size) for r in rows[share(len(rows), World(rank=rank, size=size))]] == rows


def test_what_n_processes_cannot_run(core_registry: Any) -> None:
    base = {"model": {"name_or_path": "m"}, "data": {"source": "hub/name"}, "rewards": {"len": {"use": "core_len"}},
            "grpo": {"prompts_per_step": 6}}
    cfg = config_from_dict(base, registry=core_registry)
    assert world_problems(cfg, 1) == world_problems(cfg, 2) == world_problems(cfg, 3) == []
    assert world_problems(cfg, 4) == [("grpo.prompts_per_step", "must be a multiple of the number of processes "
                                                                "(4), got 6")]
    trl = config_from_dict({**base, "trainer": {"backend": "trl"}}, registry=core_registry)
    assert world_problems(trl, 1) == []
    assert world_problems(trl, 2) == [("trainer.backend", "'trl' runs in one process only for now, not 2 "
                                                          "(multi-process training is the grpo_core trainer's)")]


def test_weighted_reduction_of_per_rank_metrics() -> None:
    parts = [({"gap/mean": 1.0, "ratio/min": 0.5, "ratio/max": 2.0}, {"gap/mean": 3, "ratio/min": 1, "ratio/max": 1}),
             ({"gap/mean": 5.0, "ratio/min": 0.1, "ratio/max": 1.5}, {"gap/mean": 1, "ratio/min": 1, "ratio/max": 1}),
             ({"gap/mean": 0.0, "ratio/min": 0.0, "ratio/max": 0.0}, {})]  # a rank with nothing to say
    assert reduce_weighted(parts) == {"gap/mean": 2.0, "ratio/min": 0.1, "ratio/max": 2.0}
    assert reduce_weighted([({"x/mean": 0.0}, {})]) == {"x/mean": 0.0}


def test_a_ctrl_c_arriving_after_another_rank_stopped_the_run_is_not_a_second_one() -> None:
    import os
    import signal
    import threading

    from grpo_core.trainer import Trainer, _NoLogger

    trainer = Trainer.__new__(Trainer)  # only the signal handling, no model
    trainer._stop, trainer.logger = threading.Event(), _NoLogger()
    previous = trainer._install_sigint()
    try:
        trainer._stop.set()  # the ranks agreed to stop: another rank got the Ctrl-C first
        os.kill(os.getpid(), signal.SIGINT)  # this rank's copy of the same Ctrl-C, late: finish as asked
        assert trainer._stop.is_set()
        with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C: stop now
            os.kill(os.getpid(), signal.SIGINT)  # (the handler runs before the next statement)
            threading.Event().wait(1.0)
    finally:
        trainer._restore_sigint(previous)
