"""What a run needs around its stages: the session, files, finished-stage reuse, the stage
log, and memory sizing."""
