"""Results as frames and tables, and the reporters that write them to files."""
