"""The recipe engine: models, resolution to launch commands, lint and memory fit."""
