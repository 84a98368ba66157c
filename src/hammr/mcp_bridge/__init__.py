"""hammr and the Model Context Protocol: its tools offered to MCP hosts, theirs to its agents."""
