"""Spec files: YAML loading with the reference builder's YAML semantics, and line numbers.

Modules:
  yamlfile   the one YAML reader (the only module importing ``yaml``): js-yaml 4 (YAML 1.2 core)
             resolvers, a line for every key, and limits on hostile input (size, alias expansion,
             depth, recursion, duplicate keys, scalars that cannot convert, files that are not files)
  validate   loaded YAML against a pydantic model; errors name the file, line and field
  bounds     one slug rule and the size bounds of every text a spec holds
  versioned  one ``schema_version`` check for every spec file (a newer one refused before its fields)
  registered a field whose value is a name a registry knows (instrument kinds), an enum in the schema
"""
