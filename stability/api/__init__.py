"""The public Python API: one function per command, the rule by name, results as frozen values.

Each module holds one command's function and its result type; `stability` re-exports them
lazily (``import stability as st; st.max_lr("sgd", tau=10).max_lr``).  A function takes the
rule by name (or as a rule value) and the rule's parameters as keywords named like the CLI
flags in snake case (`stability.api.resolve`); its result's attributes are the command's JSON
keys (`stability.api.result`).
"""
