"""The fixed, audited toolset: protocol, specs, registry, executor and one module per tool group."""
