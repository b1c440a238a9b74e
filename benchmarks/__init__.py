"""The performance and paper-claim scripts (``python benchmarks/NAME.py``) and what they share.

A package so that every script imports the same helpers (``benchmarks._results``, ``benchmarks.claims``)
once the repository root is on ``sys.path``; the scripts are run as files, not imported as a library.
"""
