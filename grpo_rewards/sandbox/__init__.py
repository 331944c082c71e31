"""Sandboxed execution of untrusted, model-written programs (see issue 3)."""
