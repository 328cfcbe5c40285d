"""The command line: one module per subcommand, each registering itself on `app`."""
