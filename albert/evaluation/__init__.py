"""Evaluation metrics of the fine-tuning tasks."""
