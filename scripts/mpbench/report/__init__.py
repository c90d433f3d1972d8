"""The report (report.py): build ties labels, plots, tables, noise notes and pages together."""
