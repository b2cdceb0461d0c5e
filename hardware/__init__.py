"""Hardware specs: GPU and node catalogs as data (``gpus.toml``, ``nodes.toml``)."""
