"""Oracle cases for the fused optimizer updates (torch._fused_adam_ / _fused_adamw_): one step on copies of
the inputs, the updated param, exp_avg and exp_avg_sq compared (the op ember.compile records for an
Adam/AdamW parameter update, ember/ops/fused_optim.py)."""
from oracle import Case


def _fused(name, **kw):
    def fn(m, p, g, ea, eas):
        p, ea, eas = p * 1, ea * 1, eas.abs()
        getattr(m, name)([p], [g], [ea], [eas], [], [m.tensor(3.0, dtype=p.dtype)], lr=0.01, beta1=0.9,
                         beta2=0.999, eps=1e-8, amsgrad=False, **kw)
        return p, ea, eas
    return fn


CASES = [
    Case("fused_adam_l2", _fused("_fused_adam_", weight_decay=0.1, maximize=False), shapes=((3, 4),) * 4,
         dtypes=("float32", "float64"), grad=False),
    Case("fused_adamw_maximize", _fused("_fused_adamw_", weight_decay=0.01, maximize=True), shapes=((3, 4),) * 4,
         dtypes=("float32", "float64"), grad=False),
]
