"""Pure encode/decode of every Volcano annotation (no I/O)."""
