"""grpo_core.run_folder.checkpoints: exact state round trip (weights, optimizer, scheduler, RNG, data position),
atomic writes, keep-last pruning."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from grpo_core.run_folder import checkpoints as ck


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Linear(8, 16)
        self.head = torch.nn.Linear(16, 1)
        self.frozen = torch.nn.Linear(8, 8)
        self.frozen.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.nn.functional.dropout(torch.relu(self.body(x)), 0.3, self.training))


def make(seed: int) -> tuple[Net, Any, Any]:
    torch.manual_seed(seed)
    net = Net()
    opt = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    return net, opt, sched


def train_steps(net: Net, opt: Any, sched: Any, n: int) -> list[float]:
    """Steps that draw from every RNG: python (batch size), numpy (targets), torch (inputs, dropout)."""
    losses = []
    for _ in range(n):
        rows = random.randint(3, 9)
        x = torch.randn(rows, 8)
        y = torch.from_numpy(np.random.standard_normal((rows, 1))).float()
        loss = torch.nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def test_round_trip_resumes_bit_exactly(tmp_path: Path) -> None:
    seed_all(1)
    net, opt, sched = make(0)
    train_steps(net, opt, sched, 3)
    path = ck.save_checkpoint(tmp_path, 3, model=net, optimizer=opt, scheduler=sched,
                              state={"data_position": 12, "order": [3, 1, 2]}, keep_last=2)
    assert path == tmp_path / "checkpoints" / "step-00000003"
    expected = train_steps(net, opt, sched, 4)
    expected_params = {n: p.detach().clone() for n, p in net.named_parameters()}

    seed_all(99)  # a fresh process: other weights, other RNG
    net2, opt2, sched2 = make(7)
    frozen_before = net2.frozen.weight.detach().clone()
    latest = ck.load_latest_checkpoint(tmp_path)
    assert latest == ck.Checkpoint(path, 3)
    state = ck.restore(latest, net2, opt2, sched2)
    assert state == {"data_position": 12, "order": [3, 1, 2], "step": 3}
    assert sched2.last_epoch == 3 and opt2.param_groups[0]["lr"] == pytest.approx(1e-2 / 4)
    assert torch.equal(net2.frozen.weight, frozen_before)  # only trainable parameters are checkpointed
    got = train_steps(net2, opt2, sched2, 4)
    assert got == expected  # same losses to the last bit: weights, Adam moments, lr, batch sizes, noise
    for n, p in net2.named_parameters():
        if p.requires_grad:
            assert torch.equal(p, expected_params[n]), n


def test_without_restore_the_continuation_differs(tmp_path: Path) -> None:
    """Guards the test above: a fresh model/optimizer really does produce different numbers."""
    seed_all(1)
    net, opt, sched = make(0)
    train_steps(net, opt, sched, 3)
    ck.save_checkpoint(tmp_path, 3, model=net, optimizer=opt, scheduler=sched, state={})
    expected = train_steps(net, opt, sched, 2)
    net2, opt2, sched2 = make(0)
    seed_all(1)
    assert train_steps(net2, opt2, sched2, 2) != expected
    ck.restore(ck.load_latest_checkpoint(tmp_path), net2, None, None)  # weights + RNG only
    assert train_steps(net2, opt2, sched2, 2) != expected  # Adam moments and lr still differ


def test_keep_last_and_rewrite_same_step(tmp_path: Path) -> None:
    net, opt, sched = make(0)
    for step in (1, 2, 3, 4):
        ck.save_checkpoint(tmp_path, step, model=net, optimizer=opt, scheduler=sched, state={"s": step}, keep_last=2)
    assert [c.step for c in ck.list_checkpoints(tmp_path)] == [3, 4]
    ck.save_checkpoint(tmp_path, 4, model=net, optimizer=opt, state={"s": "again"}, keep_last=2)
    assert [c.step for c in ck.list_checkpoints(tmp_path)] == [3, 4]
    assert ck.restore(ck.load_latest_checkpoint(tmp_path), net)["s"] == "again"
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-00000003", "step-00000004"]


def test_crash_mid_write_leaves_previous_checkpoint_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    net, opt, sched = make(0)
    ck.save_checkpoint(tmp_path, 5, model=net, optimizer=opt, scheduler=sched, state={"s": 5})
    real_save = torch.save

    def dying_save(obj: Any, f: Any, *a: Any, **k: Any) -> None:
        if str(f).endswith("rng.pt"):
            raise OSError("disk full")
        real_save(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(OSError):
        ck.save_checkpoint(tmp_path, 6, model=net, optimizer=opt, scheduler=sched, state={"s": 6})
    monkeypatch.undo()
    assert ck.load_latest_checkpoint(tmp_path).step == 5
    # the failed write's folder is removed at once (on a full disk, its space is what the next write needs)
    assert not any(p.name.startswith(".tmp-step-00000006") for p in (tmp_path / "checkpoints").iterdir())
    ck.save_checkpoint(tmp_path, 7, model=net, optimizer=opt, scheduler=sched, state={"s": 7})
    assert not any(p.name.startswith(".tmp") for p in (tmp_path / "checkpoints").iterdir())  # cleaned up


def test_restore_rejects_a_different_model(tmp_path: Path) -> None:
    net, opt, _ = make(0)
    ck.save_checkpoint(tmp_path, 1, model=net, optimizer=opt, state={})
    other = torch.nn.Linear(8, 1)
    with pytest.raises(ck.CheckpointError, match="does not match the model's trainable parameters"):
        ck.restore(ck.load_latest_checkpoint(tmp_path), other)
    assert ck.load_latest_checkpoint(tmp_path / "nothing") is None


def test_lora_checkpoint_has_a_loadable_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), LoraConfig(r=2, target_modules="all-linear"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    path = ck.save_checkpoint(tmp_path, 1, model=model, optimizer=opt, state={})
    again = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), path / "adapter")
    assert sum(p.numel() for n, p in again.named_parameters() if "lora_" in n) == \
        sum(p.numel() for p in model.parameters() if p.requires_grad)
    model2 = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), LoraConfig(r=2, target_modules="all-linear"))
    ck.restore(ck.load_latest_checkpoint(tmp_path), model2)
    for (n, p), (_, q) in zip(model.named_parameters(), model2.named_parameters()):
        assert torch.equal(p, q), n
