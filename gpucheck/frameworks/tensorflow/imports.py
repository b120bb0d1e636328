"""How a probe child of TensorFlow imports it: without matplotlib. ``import tensorflow`` loads Keras (``tf.keras``),
whose ``keras.src.visualization.plot_image_gallery`` imports ``matplotlib.pyplot`` whenever matplotlib is installed,
behind a ``try/except ImportError`` (Keras 3.x). That is about 0.45 s of every TensorFlow child's 2.1 s import here
(tensorflow 2.21.0, matplotlib 3.10: measured with ``-X importtime``, docs/PITFALLS.md), time to verdict that buys
nothing: no probe plots. The user's own processes (the suite's fixtures) are left as they are.

Should a TensorFlow ever need matplotlib to import, the import is tried again with it let in: keeping it out never
turns into a finding of its own.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

#: What the children keep out of their process.
KEPT_OUT = ("matplotlib",)


class _KeepOut(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] in KEPT_OUT:
            raise ModuleNotFoundError(f"No module named {fullname!r} (kept out of gpucheck's probe)", name=fullname)
        return None


_FINDER = _KeepOut()


def import_tensorflow() -> Any:
    """``import tensorflow`` with :data:`KEPT_OUT` kept out (again with it let in, where TensorFlow needs it);
    whatever else the import raises, it raises."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    try:
        import tensorflow

        return tensorflow
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith(KEPT_OUT):
            raise
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if f is not _FINDER]
    for name in [m for m in sys.modules if m == "tensorflow" or m.startswith(("tensorflow.", "keras"))]:
        del sys.modules[name]
    import tensorflow

    return tensorflow
