"""Problem sets: JSONL loaders, the bundled Coq sample, and theorems read from Coq's installed stdlib."""
