"""``python -m ember.bench [suite ...]``: ember against torch, interleaved in one process.

Suites are modules in this package exposing ``cases() -> list[harness.Case]``. ``--json`` saves
results with machine information; ``compare old.json new.json --plot rel.png`` plots relative speed.
"""
SUITES = ["overhead"]
