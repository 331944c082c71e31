"""The run folder: everything a run writes and reads back (checkpoints, metrics, samples, plots).

``checkpoints``  the folder's layout, checking it before a run, saving and restoring checkpoints
``lock``         one run at a time in a run folder (or on an output file)
``overlap``      outputs that would write into the run's inputs, refused before anything loads
``metrics``      ``metrics.jsonl`` and ``samples.jsonl``, and their truncation on resume
``plotting``     the curves PNG of a run
"""
