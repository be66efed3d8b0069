"""The facts every stage reads: SMP v2 releases, their images and PyTorch versions, instance types and their GPUs,
and the model architectures the launcher knows. Data and lookups only; imports no other launcher package."""
