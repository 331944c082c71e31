"""The isolation layer: work that may hang or crash runs where a deadline can stop it and a crash
cannot reach the caller. Every reward call and every math verification goes through here.

Three mechanisms, one per shape of work; each failure is a :class:`~grpo_rewards.isolation.failed.WorkerFailed`
(``timeout``, ``crash``, ``load``, ``unsendable``) or a per-item ``Outcome``, never an exception of the work:

- :mod:`.process` (:class:`~grpo_rewards.isolation.process.ProcessWorker`): one *stateful* object in one
  long-lived child process, one request at a time, killed (its process group) at the deadline and restarted
  for the next call. The per-reward workers (:mod:`grpo_rewards.reward_worker`) are built on it.
- :mod:`.pool` (:func:`~grpo_rewards.isolation.pool.run_items`): many *independent* items of a stateless
  module-level function on a shared pool of workers, each item with its own limit (``SIGALRM`` for Python,
  ``SIGPROF`` for C code), chunked to amortise IPC. Math verification (``math_equivalence``) runs on it.
- :mod:`.thread` (:class:`~grpo_rewards.isolation.thread.ThreadRunner`): the fallback for a callable that
  cannot cross a process boundary (a closure, a lambda, anything in ``__main__``); a timeout stops waiting,
  not the call.

Why the process worker and the pool stay two mechanisms: a reward object keeps state between calls (caches,
counters behind its ``metrics()``, connections), so it must live in *one* process that is never shared and
receives whole batches, while the pool pickles its function with every task and may run any item on any worker,
which would lose that state; conversely, a pool item's deadline is per item (a hung item costs one item of a
chunk), which a one-batch-per-call worker cannot give without one round trip per item. The worker also starts
a fresh interpreter rather than a ``multiprocessing`` child, so a training script needs no ``__main__`` guard;
the pool uses ``multiprocessing`` start methods, as pebble requires. The thread runner exists because some
callables cannot be pickled at all. The code sandbox keeps its own pool (:mod:`grpo_rewards.sandbox.pool`):
its slots are pre-started, jailed zygotes that run untrusted programs (code and output in memfds, seccomp,
resource limits), not Python callables, so it belongs with the sandbox.
"""
