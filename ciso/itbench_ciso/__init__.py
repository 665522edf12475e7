"""CISO compliance domain of itbench: evidence collection and Rego policies on hidden variants."""

__version__ = "0.1.0"
