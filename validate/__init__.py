"""Validation: measured rows (published data, our GPU microkernels) vs perfmodel predictions."""
