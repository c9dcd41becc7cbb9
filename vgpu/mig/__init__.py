"""Dynamic MIG geometry reconciliation."""
