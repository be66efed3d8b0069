"""Backends that turn a Plan into a running job. Only these modules import the SageMaker SDK."""
