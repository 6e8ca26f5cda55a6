"""The repro printer: :func:`repro` writes a program as a standalone script that shows the difference."""
from __future__ import annotations

from .harness import HARNESS


def repro(program, seed=0, result=None, calls=3, backend="inductor", opt=None) -> str:
    """A standalone script that shows the difference (``opt``: the C optimisation level it was found
    with, see :func:`c_opt_level`)."""
    head = f"# ember.compile fuzz repro (program seed {program.seed!r}, values seed {seed})"
    if result is not None and result.message:
        head += f"\n# call {result.call}: {result.message}"
    specs = ",\n         ".join(repr(s) for s in program.specs())
    be = "" if backend == "inductor" else f", backend={backend!r}"
    names = [i[0] for i in program.inputs]
    flags = ""
    if opt:
        head += f"\n# found with the generated C built at {opt}"
        flags = f"from ember.compiler.fuzz import c_opt_level\nc_opt_level({opt!r}).__enter__()   # build at {opt}\n"
    return f"""{head}
{HARNESS}

{program.source()}
SPECS = [{specs}]
NAMES = {names!r}
{flags}cf = ember.compile(f{be})
for call in range({calls}):       # call 0 captures (runs eagerly); the others run the compiled code
    (eo, eg, ex), (co, cg, cx) = run(f, SPECS, {seed}, call), run(cf, SPECS, {seed}, call)
    for what, e, c in [(f"output {{i}}", *ec) for i, ec in enumerate(zip(eo, co))] + \\
                      [(f"{{n}}.grad", *ec) for n, ec in zip(NAMES, zip(eg, cg))] + \\
                      [(f"{{n}} after the call", *ec) for n, ec in zip(NAMES, zip(ex, cx))]:
        if (e is None) != (c is None):
            print(f"call {{call}}: {{what}}: eager {{e}}, compiled {{c}}")
        elif e is not None and e.size and not np.array_equal(e, c, equal_nan=e.dtype.kind == "f"):
            print(f"call {{call}}: {{what}}: max |eager - compiled| =", np.abs(e.astype(float) - c.astype(float)).max())
"""
