"""`webgym`, the one command line: the top of the house, free to import every layer below."""
