"""Evaluation metrics: pass@N (:mod:`.passk`), rank-bias uplift rate (:mod:`.uplift`), diversity (:mod:`.diversity`)."""
