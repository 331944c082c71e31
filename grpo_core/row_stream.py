"""Streamed training rows (``[data] streaming = true``): a ``datasets.IterableDataset`` read a step at a time.

How it shuffles: ``datasets``' buffer shuffle. Each epoch re-creates the stream, ``shuffle(seed=[data] seed,
buffer_size=[data] shuffle_buffer)`` then ``set_epoch(epoch)``: a buffer of ``shuffle_buffer`` rows is filled
from the stream (whose shard order is shuffled too) and each row handed out is a random one of the buffer, the
draws seeded by ``seed + epoch``. So the order is a function of ``(seed, epoch)`` alone, like the map-style
order (:func:`grpo_core.data.epoch_order`), but only ``shuffle_buffer`` rows apart at most.

How a resume continues mid-epoch: the checkpoint stores the epoch and the number of rows of it read so far
(``position``); :meth:`StreamedRows.take` re-creates that epoch's stream and reads past ``position`` rows
before handing out the next ones, so a resumed run gets exactly the rows the interrupted run would have got
(the cost: reading, not training on, the rows of the epoch already used). ``datasets``' own
``IterableDataset.state_dict()`` is not used because it drops the shuffle buffer's content.

Rows are renamed and checked as they are read: a bad row stops the run with ``data.source: row N of epoch E:
what`` (a stream is not read ahead to find every bad row). Rows whose prompt is over ``max_prompt_length``
are checked the same way, when read (``keep``, set by the trainer).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from grpo_rewards.errors import UserError


class StreamedRows:
    """Training rows fetched from a stream: :meth:`take` hands out the next rows as numbers that index this
    object (``rows[i]``) until the next :meth:`take`; the epoch and position say where the stream stands."""

    def __init__(self, epoch_stream: Callable[[int], Any], shape: Callable[[Any, int, int], dict[str, Any]],
                 where: str, error: type[UserError]) -> None:
        """``epoch_stream(epoch)``: that epoch's rows; ``shape(raw, epoch, number)``: a row renamed and checked
        (raising ``error``)."""
        self.epoch_stream, self.shape, self.where, self.error = epoch_stream, shape, where, error
        self.keep: Callable[[dict[str, Any]], bool] | None = None  # the trainer's prompt-length rule
        self.dropped = 0  # rows left out by ``keep`` so far
        self._it: Iterator[Any] | None = None
        self._at = (-1, -1)  # (epoch, position) of ``_it``
        self._held: dict[int, dict[str, Any]] = {}
        self._count = 0

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self._held[i]

    def __repr__(self) -> str:
        return f"<rows streamed from {self.where}>"

    def _next(self, it: Iterator[Any], epoch: int, position: int) -> Any:
        """The next raw row; a row the reader cannot parse (a broken line of a streamed file) is ``error``."""
        try:
            return next(it)
        except (StopIteration, UserError):
            raise
        except Exception as exc:  # noqa: BLE001 (datasets, arrow, json and the hub raise many kinds)
            inner = exc.__cause__ or exc.__context__ or exc
            why = (str(inner).strip() or str(exc).strip() or type(exc).__name__).splitlines()[0][:300]
            raise self.error(f"data.source: {self.where}: the row after row {position} of epoch {epoch} cannot be "
                             f"read ({why})") from None

    def _open(self, epoch: int, position: int) -> None:
        self._it = iter(self.epoch_stream(epoch))
        for skipped in range(position):  # past the rows of this epoch already used
            try:
                self._next(self._it, epoch, skipped)
            except StopIteration:
                break
        self._at = (epoch, position)

    def head(self, count: int) -> Iterator[dict[str, Any]]:
        """The first ``count`` rows of epoch 0, checked (not counted as read)."""
        it = iter(self.epoch_stream(0))
        for number in range(1, count + 1):
            try:
                raw = self._next(it, 0, number - 1)
            except StopIteration:
                return
            yield self.shape(raw, 0, number)

    def take(self, n: int, epoch: int, position: int) -> tuple[list[int], int, int]:
        """The next ``n`` rows from ``(epoch, position)`` (an epoch that ends goes on with the next one), as
        numbers for ``rows[i]``, and the epoch and position after them."""
        if self._it is None or self._at != (epoch, position):
            self._open(epoch, position)
        assert self._it is not None
        self._held, out, kept_this_epoch = {}, [], position > 0
        while len(out) < n:
            try:
                raw = self._next(self._it, epoch, position)
            except StopIteration:
                if not kept_this_epoch:
                    what = "no rows" if position == 0 and not self.dropped else "no row short enough to train on"
                    raise self.error(f"data.source: {self.where} has {what} (epoch {epoch})") from None
                epoch, position, kept_this_epoch = epoch + 1, 0, False
                self._open(epoch, 0)
                continue
            position += 1
            row = self.shape(raw, epoch, position)
            if self.keep is not None and not self.keep(row):
                self.dropped += 1
                continue
            kept_this_epoch = True
            self._held[self._count] = row
            out.append(self._count)
            self._count += 1
        self._at = (epoch, position)
        return out, epoch, position
