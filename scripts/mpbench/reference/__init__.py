"""The PyTorch reference: safetensors (the file format, numpy only), torch_model (torch_reference.py)
and check (check_reference.py: the runner's export against the reference)."""
