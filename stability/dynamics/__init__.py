"""Linear dynamics of a rule on the quadratic model, read off the rule's own step; random products.

* `stability.dynamics.linear` — probe a rule's step: lag matrices, state (block companion)
  matrix, characteristic polynomial p(ω, lr) with the step size kept formal;
* `stability.dynamics.symbolic` — the same polynomial in sympy;
* `stability.dynamics.monodromy` — periodic rules: the monodromy matrix over one period.
* `stability.dynamics.random_products` — random products: the top Lyapunov exponent, renormalised.
"""
