"""The engine: the op tables, scalar :class:`Value` nodes, :class:`Tensor` nodes and engine state.

Imports numpy only; nothing here knows about traces, views or notebooks.
"""
