"""pytest + nbval settings for the notebooks.

stderr is excluded from the comparison: TensorFlow and Horovod write warnings there whose wording and
number vary with the machine. It is still shown to learners, and an error still fails the cell.
"""

from __future__ import annotations

import nbval.plugin

_original_init = nbval.plugin.IPyNbFile.__init__


def _init_without_stderr(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    _original_init(self, *args, **kwargs)
    self.skip_compare = tuple(self.skip_compare) + ("stderr",)


nbval.plugin.IPyNbFile.__init__ = _init_without_stderr
