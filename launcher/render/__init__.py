"""Render: the Jinja templates (the shipped ones in templates/, or a team's laid over them by file name) turned
into the job's source directory (entry script, secrets loader, requirements) and into the SMP v2 distribution,
which is parsed and checked against SMP v2's parameters; and that directory packed into a content-addressed
tarball. Render is handed what it reads (the spec, the advisor's decisions, the documents to write) and never
sees a Plan: the plan calls it. No AWS call."""
