"""Presenting predictions: text tables (`tables`), progress bars (`progress`) and matplotlib
charts of a scheduled graph (`plots`). JSON and CSV come from `Prediction` itself."""
