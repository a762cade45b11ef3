"""What is computed from a finished run: the trace, the numerical check, expected answers,
the PyTorch replay and graph algorithms. Imports :mod:`gradmagic.core` only."""
