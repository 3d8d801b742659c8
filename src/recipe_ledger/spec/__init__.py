"""Spec files: YAML loading with the reference builder's YAML semantics, and line numbers.

Modules:
  yamlfile   PyYAML with js-yaml 4 (YAML 1.2 core) resolvers and a line for every key (the only
             module importing ``yaml``)
  validate   loaded YAML against a pydantic model; errors name the file, line and field
"""
