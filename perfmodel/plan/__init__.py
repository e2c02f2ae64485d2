"""Deployment planning on top of whole-model predictions: memory accounting (`memory`), serving
throughput and latency (`serving`), training steps (`training`), and their plots (`plots`)."""
