"""GPU sessions: ledger (gpu_ledger.py: which phase next, the CUDA sources hash) and
session_summary (gpu_session_summary.py: one phase's figures from its logs)."""
