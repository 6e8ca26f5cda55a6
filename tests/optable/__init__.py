"""The op table: every module here defines ``CASES`` (a list of oracle.Case); together they must
exercise every op in ember's registry (tests/test_op_table.py checks that)."""
import importlib
import pkgutil


def all_cases():
    cases = []
    for m in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{m.name}")
        cases.extend(getattr(mod, "CASES", []))
    return cases
