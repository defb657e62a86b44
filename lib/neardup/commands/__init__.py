"""The commands: each a list of stages on the run harness."""
