"""Detection of fallback delegation: static (the entry's source) and dynamic (what ran)."""
