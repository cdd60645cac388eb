"""`experiment-runner bisect`: the first bad point (a commit, a package version) between a
good one and a bad one, each measured by a sweep of its own and judged as `compare` judges
(docs/bisect.md)."""
