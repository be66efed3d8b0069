"""Modules that run on the training hosts, copied verbatim into the job's source dir by launcher.render.files.

They are plain Python (linted and imported by the tests as such); the entry script imports them as
top-level modules (`import train_data`). Importing this package imports nothing heavy; its modules need torch.
"""
