"""A cell's text before the rewrite: the shell's own syntax (``%time``, ``!ls``, ``x?``) made
Python as in a plain cell, and whether the cell's output is silenced with ``;``.
"""

from __future__ import annotations

import re


def _ends_with_semicolon(source: str) -> bool:
    """True if the last token of ``source`` (comments aside) is ``;``."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):  # the cell's own SyntaxError is shown already
        return False
    for token in reversed(tokens):
        if token.type in (tokenize.ENDMARKER, tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            continue
        return token.type == tokenize.OP and token.string == ";"
    return False


def _shell_syntax(shell, source: str) -> tuple[str, int]:
    """``source`` with the shell's own syntax made Python, as in a plain cell.

    The shell's cell transforms (as IPython's ``%%time`` applies them) turn
    ``%time ...``, ``%matplotlib inline``, ``!ls`` and ``x?`` lines into calls
    of ``get_ipython()``, one line for one line. Leading blank lines, which the
    transforms drop, are counted instead, so the rewritten code keeps the
    user's line numbers. Returns the text and how many lines were skipped.
    """
    lines = source.splitlines(keepends=True)
    skipped = 0
    while skipped < len(lines) and not lines[skipped].strip():
        skipped += 1
    text = "".join(lines[skipped:])
    if _plain_python(shell, text):
        return text if text.endswith("\n") else text + "\n", skipped
    return shell.transform_cell(text), skipped


def _plain_python(shell, text: str) -> bool:
    """True if the shell's cell transforms would give ``text`` back unchanged (plus a newline).

    Only for IPython's own transforms (none added), a cell of several lines
    (a single line also goes through the prefilter: autocall and the like),
    not indented, with none of the characters the transforms act on: ``%``
    (magics), ``!`` (shell commands), ``?`` (help), prompts to strip (``>>>``,
    ``...``, ``In [``), the escapes at the start of a line (``,``, ``;``,
    ``/``) and lines of spaces (which they empty). Anything else takes the
    transforms, a noticeable share of a small cell's time.
    """
    if (
        _DEFAULT_TRANSFORMS is None
        or "\n" not in text.rstrip("\n")
        or text[:1].isspace()
        or any(c in text for c in "%!?")
        or ">>>" in text
        or "..." in text
        or "In [" in text
    ):
        return False
    if any(line.lstrip()[:1] in _ESCAPES for line in text.splitlines()):
        return False
    if _BLANK_WITH_SPACES.search(text):  # (the transforms empty such lines)
        return False
    manager = shell.input_transformer_manager
    if shell.input_transformers_post or type(manager) is not _DEFAULT_TRANSFORMS[0]:
        return False
    cleanup = manager.cleanup_transforms
    return (
        list(map(type, cleanup)) == _DEFAULT_TRANSFORMS[1]
        and cleanup[:2] == _DEFAULT_TRANSFORMS[2]
        and manager.line_transforms == _DEFAULT_TRANSFORMS[3]
        and manager.token_transformers == _DEFAULT_TRANSFORMS[4]
    )


_ESCAPES = frozenset(",;/")
_BLANK_WITH_SPACES = re.compile(r"^[^\S\r\n]+\r?$", re.M)


def _default_transforms():
    """(manager class, cleanup transform types, the cleanup functions, line transforms, token
    transformers) of IPython's own input transforms; None if this IPython has other ones."""
    try:
        from IPython.core import inputtransformer2 as it

        default = it.TransformerManager()
        return (
            it.TransformerManager,
            list(map(type, default.cleanup_transforms)),
            default.cleanup_transforms[:2],
            list(default.line_transforms),
            list(default.token_transformers),
        )
    except Exception:  # noqa: BLE001 - another IPython: always run its transforms
        return None


_DEFAULT_TRANSFORMS = _default_transforms()
