"""Training tasks: what the one training loop (`albert.training.loop`) trains."""
