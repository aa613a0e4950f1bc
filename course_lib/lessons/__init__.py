"""The lesson layer: helpers the notebooks call (simulations, tables, plots, self-checks, widgets).

May import the training and runner layers; nothing below it imports this layer.
"""
