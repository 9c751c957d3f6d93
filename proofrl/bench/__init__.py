"""``proofrl bench``: each paper's claims as paired experiments with intervals, tests and verdicts."""
