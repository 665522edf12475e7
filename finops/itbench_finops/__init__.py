"""FinOps domain of itbench: cost incidents in an AWS account served by moto."""

__version__ = "0.1.0"
