"""Δ0 chosen privately (``max_items_per_user="auto"``) in Beam; the math is
``beam_dpsu.core.max_items_choice``.

* ``chosen``: ``Chosen``, a parameter with one value per candidate Δ0 and the
  chosen candidate's index, which the steps of a selection read (bounding, the
  histograms, the noisy threshold, SIPS's rounds, the sequential policies);
* ``selection``: a selection's size histogram, the noisy choice and the records
  that wait for it (``AutoSelection``, ``ChooseFromSizeCounts``);
* ``counts``: the same for ``CountReleased`` (``SampleAtChosenMaxItems``).

This package imports none of them: ``selection`` and ``counts`` build on the
steps that read ``chosen`` (``beam_dpsu.beam.bounding`` among them), so importing
them here would make those steps import themselves. Import the module by its
name (``from beam_dpsu.beam.max_items_choice.chosen import Chosen``).
"""
