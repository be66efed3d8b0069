"""The job spec: its models, its loader and its presets."""
from launcher.spec.loader import LoadedSpec, load_spec
from launcher.spec.models import JobSpec

__all__ = ["JobSpec", "LoadedSpec", "load_spec"]
