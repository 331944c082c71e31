"""Tests of the sandbox (issue 3): hostile and benign suites, soak, judging, backends, reward."""
