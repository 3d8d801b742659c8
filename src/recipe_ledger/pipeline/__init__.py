"""The one place the stages are wired: spec -> plan -> run -> measurements -> verdict -> record."""
