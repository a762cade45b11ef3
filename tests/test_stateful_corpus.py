"""Stateful real code (networkx, sortedcontainers, stdlib), plain vs magic/plain cells."""

import pytest

from stateful_corpus import run_corpus

THRESHOLD = 0.995


@pytest.mark.slow
def test_stateful_code_leaves_the_same_deep_state(ip):
    pytest.importorskip("networkx")
    total, differences = run_corpus(ip, every=2)
    assert total > 1500
    same = (total - len(differences)) / total
    assert same >= THRESHOLD, (
        f"{same:.2%} of {total} examples leave the same state; first differences: "
        + "; ".join(d.where for d in differences[:10])
    )
