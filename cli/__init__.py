"""The `shoal` command: the broker's tools, one module per command group.

Everything that talks to a broker goes through our asyncio `client/`; `share-state dump` reads
a data directory offline through storage's read-only API (`storage.inspect`). The one way into
the broker's own code is `shoal serve`, which hands over to `broker.main` (see `cli.serve`).
The broker never imports this package.
"""
