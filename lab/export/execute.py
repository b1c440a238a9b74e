"""Executing a notebook with nbclient in a kernel that runs this very interpreter and ``lab``."""
from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["execute_notebook"]


def _current_python_kernel_manager(sockets: str | None = None):
    """A kernel manager whose kernel is this interpreter's ipykernel, whatever kernelspecs are installed.

    ``sockets``: a folder for the kernel's channels as Unix sockets (POSIX), instead of TCP ports. Over TCP the
    manager picks five free ports and the kernel binds them later; a process starting meanwhile can take one
    (seen with two test workers starting kernels, servers and Dask clusters at once): the kernel's heartbeat
    fails to bind and the client waits on it for ever."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    class _ThisPython(KernelSpecManager):
        def get_kernel_spec(self, kernel_name, *args, **kwargs):
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name="Python 3 (ipykernel)", language="python", resource_dir="")

    ipc = {"transport": "ipc", "ip": os.path.join(sockets, "kernel")} if sockets and os.name == "posix" else {}
    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=_ThisPython(), **ipc)


def execute_notebook(nb, cwd: str | os.PathLike | None = None, *, timeout: int = 600,
                     env: dict[str, str] | None = None):
    """Execute ``nb`` in place with nbclient, in a kernel running this Python interpreter.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        Executed in place (outputs are added to its cells).
    cwd : path, optional
        Working folder of the kernel (default: the current one).
    timeout : int or float
        Seconds allowed per cell.
    env : dict, optional
        Extra environment variables for the kernel. The folder holding ``lab`` is
        prepended to ``PYTHONPATH`` so the kernel imports this very ``lab``.

    Returns
    -------
    nbformat.NotebookNode
        ``nb``, executed.

    Raises
    ------
    nbclient.exceptions.CellExecutionError
        When a cell raises; ``nb`` keeps the outputs up to and including that cell.
    """
    from nbclient import NotebookClient

    import lab

    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds. Got {timeout!r} instead.")
    timeout = int(math.ceil(timeout))
    kernel_env = dict(os.environ)
    kernel_env.update(env or {})
    lab_parent = str(Path(lab.__file__).resolve().parent.parent)
    paths = [p for p in kernel_env.get("PYTHONPATH", "").split(os.pathsep) if p]
    kernel_env["PYTHONPATH"] = os.pathsep.join([lab_parent] + [p for p in paths if p != lab_parent])
    kernel_env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    folder = str(Path(cwd).resolve()) if cwd is not None else os.getcwd()
    with tempfile.TemporaryDirectory(prefix="lab-kernel-") as sockets:
        km = _current_python_kernel_manager(sockets)
        client = NotebookClient(nb, km=km, timeout=timeout, resources={"metadata": {"path": folder}})
        try:
            # nbclient shuts down only kernels whose manager it made; ours would idle (about 1 GiB) until
            # this process exits, so ask it to clean up, and make sure in the finally.
            client.execute(env=kernel_env, cleanup_kc=True)
        finally:
            _shut_down(km)
    return nb


def _shut_down(km) -> None:
    """Stop ``km``'s kernel if it still runs (a failed start or cleanup can leave one)."""
    from jupyter_core.utils import run_sync

    if km.has_kernel:
        run_sync(km.shutdown_kernel)(now=True)
