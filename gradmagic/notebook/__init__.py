"""The notebook side: the cell rewrite, the cell runtime, the magic's options and the magic.

The only layer that imports IPython.
"""
