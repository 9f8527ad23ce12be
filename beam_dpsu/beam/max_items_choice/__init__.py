"""Δ0 chosen privately (``max_items_per_user="auto"``) in Beam: ``chosen``, ``selection``,
``counts`` (math: ``beam_dpsu.core.max_items_choice``). Not imported here (``selection``
and ``counts`` build on steps that import ``chosen``): import each by name.
"""
