"""helios.plan_trace on synthetic words (the layout the run's kernel writes: a header a
run, then TRACE_STAMP words a member and workgroup), and a trace read too early."""

from __future__ import annotations

import numpy as np
import pytest

import helios
from helios import _helios, plan_trace


def _words(runs: list[list[tuple[int, int, list[tuple[int, ...]]]]]) -> bytes:
    """runs: each a list of members (n, k, [(before, go, done[, inputs, first]) a
    workgroup]), ns."""
    out: list[int] = []
    for members in runs:
        grid = len(members[0][2])
        head = [0] * _helios.TRACE_HEADER
        head[_helios.TRACE_MEMBERS], head[_helios.TRACE_GRID] = len(members), grid
        out += head
        for n, k, stamps in members:
            for ns in stamps:
                w = [0] * _helios.TRACE_STAMP
                for i, t in enumerate(ns):
                    w[2 * i], w[2 * i + 1] = t & 0xFFFFFFFF, t >> 32
                w[_helios.TRACE_N], w[_helios.TRACE_K] = n, k
                out += w
    return np.array(out, dtype=np.uint32).tobytes()


def test_a_run_s_members_their_spans_and_releases():
    """Two workgroups, a product then an attention then a product: each member's span
    runs from the last done before it, its release from that to its first go (negative
    where a workgroup went early), and a product's GB/s is its weights over its span;
    stamps past 2^32 ns keep their high words."""
    big = 1 << 33
    att = _helios.TRACE_ATTENTION
    words = _words([[(64, 32, [(big + 0, big + 0, big + 1000), (big + 0, big + 100, big + 3000)]),
                     (att, 4, [(big + 1000, big + 3500, big + 5000), (big + 3000, big + 3600, big + 7000)]),
                     (16, 64, [(big + 5000, big + 7500, big + 9000), (big + 7000, big + 8000, big + 8000)])]])  # fmt: skip
    members = plan_trace.parse(words)
    assert [(t.run, t.member, t.kind, t.n, t.k) for t in members] == [
        (0, 0, "product", 64, 32), (0, 1, "attention", 0, 4), (0, 2, "product", 16, 64)
    ]  # fmt: skip
    assert members[1].go.tolist() == [big + 3500, big + 3600]
    rows = plan_trace.summarize(members)
    assert [r["kind"] for r in rows] == ["64x32", "attention", "16x64"]
    assert [r["span_us"] for r in rows] == pytest.approx([3.0, 4.0, 2.0])
    assert [r["release_us"] for r in rows] == pytest.approx([0.0, 0.5, 0.5])
    assert [r["work_median_us"] for r in rows] == pytest.approx([1.95, 2.45, 0.75])
    assert rows[0]["gbs"] == pytest.approx(2 * 64 * 32 / 3000) and rows[1]["gbs"] == 0.0


def test_the_stamps_inside_a_member_are_read_where_a_workgroup_stamped_them():
    """inputs and first: a workgroup's go to each, the median over those that stamped
    (non-zero); 0.0 where none did (an attention's workgroups without a task)."""
    words = _words([[(64, 32, [(0, 100, 900, 300, 500), (0, 200, 1000, 700, 800), (0, 300, 1100, 0, 0)]),
                     (_helios.TRACE_ATTENTION, 2, [(900, 1200, 1500, 0, 0)] * 3)]])  # fmt: skip
    members = plan_trace.parse(words)
    assert members[0].inputs.tolist() == [300, 700, 0] and members[0].first.tolist() == [500, 800, 0]
    rows = plan_trace.summarize(members)
    assert rows[0]["inputs_median_us"] == pytest.approx(0.35)  # 200 and 500 ns; the third stamped none
    assert rows[0]["first_median_us"] == pytest.approx(0.5)  # 400 and 600 ns
    assert rows[1]["inputs_median_us"] == 0.0 and rows[1]["first_median_us"] == 0.0


def _zero(w: np.ndarray, i: int) -> np.ndarray:
    w[i] = 0
    return w


@pytest.mark.parametrize(
    "mangle,says",
    [
        (lambda w: w[: len(w) - 4], "header reads"),  # a run's words cut short
        (lambda w: _zero(w, _helios.TRACE_GRID), "header reads"),  # no workgroups
        (lambda w: _zero(w, w.size - _helios.TRACE_STAMP + 4), "replay the plan first"),  # a done stamp of 0
    ],
)
def test_words_that_disagree_with_their_header_or_were_never_stamped_are_refused(mangle, says):
    w = np.frombuffer(_words([[(8, 8, [(1, 2, 3), (1, 2, 4)])]]), dtype=np.uint32)
    with pytest.raises(ValueError, match=says):
        plan_trace.parse(mangle(w.copy()).tobytes())


def test_a_trace_read_before_any_replay_says_to_replay_first(monkeypatch):
    monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", "1")
    monkeypatch.setenv("HELIOS_PLAN_TRACE", "1")
    with helios.Device() as dev:
        x = dev.upload(np.ones((1, 64), np.float16))
        w = dev.upload(np.full((64, 64), 0.01, np.float16))
        with dev.plan() as p:
            p.matmul(p.matmul(x, w, trans_b=True), w, trans_b=True)
        with pytest.raises(ValueError, match="replay the plan first"):
            p.trace()
        p.replay()
        assert [t.n for t in p.trace()] == [64, 64]
