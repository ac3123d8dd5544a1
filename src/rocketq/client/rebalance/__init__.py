"""Client-side rebalancing: allocate strategies (``allocate``), RebalanceImpl and its push / lite
pull variants (``impl``), and the RebalanceService that runs them (``service``)."""
