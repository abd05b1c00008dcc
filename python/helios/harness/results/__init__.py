"""What a measurement leaves: result files (schemas, rows, reading with fields
checked), their tables, history, compare and its verdicts, reports, the HTML
page and the CI comment. Imports the protocol, never a workload."""
