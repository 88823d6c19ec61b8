"""The soak benchmark: its growth per round, and a short run of its scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmark_scripts import benchmark_module  # tests/benchmark_scripts.py: tests/ is on sys.path


def test_growth_is_fitted_over_the_second_half() -> None:
    slope = benchmark_module("soak").slope
    # A first half's warm-up growth is left out; a steady leak of 2 a round is not.
    assert slope([100, 300, 350, 352, 354, 356, 358, 360]) == pytest.approx(2.0)
    assert slope([500, 900, 900, 900]) == pytest.approx(0.0)
    assert slope([1.0]) == 0.0


def test_the_scenarios_run_and_report_what_they_hold(tmp_path: Path) -> None:
    soak = benchmark_module("soak")
    results = soak.run(2, 2, ["analyser_closed", "live_session", "video_job"], tmp_path)
    assert list(results) == ["analyser_closed", "live_session", "video_job"]
    for result in results.values():
        assert len(result["samples"]) == 2
        assert all(
            s["rss_mib"] > 50 and s["threads"] >= 1 and s["fds"] >= 3 for s in result["samples"]
        )
    assert (tmp_path / "soak_out.mp4").stat().st_size > 0  # the video job wrote its clip
