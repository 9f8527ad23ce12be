"""Δ0 chosen privately (``max_items_per_user="auto"``) in Beam; import each module by name
(``selection`` and ``counts`` build on steps that import ``chosen``)."""
