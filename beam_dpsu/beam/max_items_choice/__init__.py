"""Δ0 chosen privately (``max_items_per_user="auto"``) in Beam; the math is
``beam_dpsu.core.max_items_choice``.

``chosen`` (``Chosen``: a parameter's value per candidate Δ0, and the chosen index),
``selection`` (a selection's choice: ``AutoSelection``), ``counts`` (``CountReleased``'s:
``SampleAtChosenMaxItems``). Not imported here: ``selection`` and ``counts`` build on
steps that import ``chosen``, which would then import themselves. Import each by name.
"""
