"""Experiments: what to compare (arms), how to measure (instruments, points, repeats), the bar."""
