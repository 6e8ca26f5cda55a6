"""``python -m ember.demo``: fit a tiny linear regression with autograd and watch the loss fall."""
from __future__ import annotations

import ember


def regression_demo(steps: int = 200, lr: float = 0.1) -> list[float]:
    """Fit y = 3x - 2 (plus noise) with plain gradient descent; returns the loss history."""
    ember.manual_seed(0)
    x = ember.rand(256, 1) * 4 - 2
    y = 3 * x - 2 + 0.1 * ember.randn(256, 1)
    w = ember.zeros(1, 1, requires_grad=True)
    b = ember.zeros(1, requires_grad=True)
    losses = []
    for step in range(steps):
        pred = x @ w + b
        loss = ((pred - y) ** 2).mean()
        loss.backward()
        with ember.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad = None
        b.grad = None
        losses.append(loss.item())
        if step % 40 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {loss.item():.5f}")
    print(f"fitted w = {w.item():.3f} (true 3), b = {b.item():.3f} (true -2)")
    return losses


def main() -> None:
    print("ember demo: a tiny regression fitted with autograd")
    regression_demo()


if __name__ == "__main__":
    main()
