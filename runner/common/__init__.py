"""What every process of the runner shares: parent, fork servers and children."""
