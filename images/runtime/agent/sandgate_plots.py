"""plt.show() in a stateful session: each open figure is saved as /mnt/data/figure-<n>.png (n growing over
the session, never overwriting) and closed, so the plot comes back as an artifact. matplotlib is patched
only when the user's code imports it: importing it here would cost every sandbox half a second."""
import os
import sys

from sandgate_io import WORKDIR

PYPLOT = "matplotlib.pyplot"
_counter = [0]


def _next_path():
    while True:
        _counter[0] += 1
        path = os.path.join(WORKDIR, "figure-%d.png" % _counter[0])
        if not os.path.lexists(path):
            return path


def patch(pyplot):
    if getattr(pyplot, "_sandgate_patched", False):
        return

    def show(*args, **kwargs):
        for num in pyplot.get_fignums():
            pyplot.figure(num).savefig(_next_path())
        pyplot.close("all")

    show.__doc__ = "sandgate: saves each open figure as /mnt/data/figure-<n>.png and closes it."
    pyplot.show = show
    pyplot._sandgate_patched = True


def patch_loaded():
    """Patches pyplot if it got in some way the import hook did not see."""
    module = sys.modules.get(PYPLOT)
    if module is not None:
        patch(module)


class _Hook:
    """A meta path finder (importlib.abc is not imported for it: that alone costs 15 ms at start-up) that
    finds matplotlib.pyplot with the other finders, and patches it right after it has loaded."""

    def find_spec(self, name, path, target=None):
        if name != PYPLOT:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                _wrap(spec.loader)
                return spec
        return None


def _wrap(loader):
    original = loader.exec_module

    def exec_module(module):
        original(module)
        patch(module)

    loader.exec_module = exec_module


def install():
    sys.meta_path.insert(0, _Hook())
