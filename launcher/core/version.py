"""The version of smp-launch: the one source of the package's version, its jobs' version tag and the
user agent, kept here so that no internal module imports the package root (which is the public face)."""

VERSION = "0.1.0"
