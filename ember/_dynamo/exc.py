"""``ember._dynamo.exc``: the compiler's exceptions under the names code written for ``torch._dynamo`` uses."""
from ..compiler.dynamic import ConstraintViolationError  # noqa: F401
