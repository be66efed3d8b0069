"""smp-launch: plan, check and launch SageMaker model parallelism v2 (SMP v2) training jobs."""

__version__ = "0.1.0"
