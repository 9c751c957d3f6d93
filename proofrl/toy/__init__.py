"""The rank-bias toy experiment of "Rewarding the Unlikely" (arXiv:2506.02355, Appendix A).

:mod:`.env` holds the environment and the batched MLP policy, :mod:`.experiment` the GRPO variants and the
training/evaluation loop, :mod:`.report` the plots and the markdown report. ``proofrl toy`` runs it all.
"""
