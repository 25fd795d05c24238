"""Studies: capture folders (the folder, its calls, the contention verdict, the ledger, compare,
census, the issue comment), and the whole-run summary that composes the views into findings."""
