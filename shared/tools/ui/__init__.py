"""`ksched ui`: a small web page over a running ksched (read-only)."""
