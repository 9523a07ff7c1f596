"""mqadmin's export commands (``tools.command.export``): exportConfigs, exportMetadata,
exportMetrics."""
