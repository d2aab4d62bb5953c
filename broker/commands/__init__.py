"""`shoal` subcommands other than `serve`: one module per command group.

Everything that talks to a broker goes through our asyncio `client/`; `share-state dump` reads
a data directory offline through `storage/`.
"""
