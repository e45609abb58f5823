"""Update rules: immutable values with a pure step, one family per module, and a registry."""

from stability.rules.base import History, Passes, step
from stability.rules.delayed_momentum import DelayedMomentum
from stability.rules.registry import RULES, build_rule, get_spec

__all__ = ["RULES", "DelayedMomentum", "History", "Passes", "build_rule", "get_spec", "step"]
