"""Orchestrate: many jobs and their order: the queue that keeps N running (a single submit is a queue of
one), the retry policy, reruns and diffs of stored plans, and SageMaker Pipelines."""
