"""From a model description to an op graph: model files (`models`), the graph builder for
prefill/decode/training steps under TP/EP/PP/DP (`builder`), and low-precision linear-layer
recipes (`recipes`)."""
