"""A transform calibrates each Δ0 once when it is built (no cache stands in for it)."""

from beam_dpsu import SelectItems
from beam_dpsu.core import delta_split, mechanisms
from beam_dpsu.core.budgets import Budget


def test_auto_sips_splits_delta_once_per_candidate(monkeypatch):
    calls = []
    split = delta_split.split_delta

    def counted(*args, **kwargs):
        calls.append(args[:2])
        return split(*args, **kwargs)

    from beam_dpsu.core import parallel_mechanisms
    monkeypatch.setattr(parallel_mechanisms, "split_delta", counted)
    select = SelectItems(mechanisms.SIPS("auto"), Budget(1.0, 1e-5))
    candidates = select.auto_plan.candidates
    assert len(candidates) > 1 and len(calls) == len(candidates)
    assert len(select.report["selection_by_candidate"]) == len(candidates)
    assert len(calls) == len(candidates)  # the report reads the calibrations made
