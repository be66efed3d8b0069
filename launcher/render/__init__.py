"""Render: the Jinja templates turned into the job's source directory (entry script, requirements, the SMP v2
distribution), and that directory packed into a content-addressed tarball. No AWS call."""
