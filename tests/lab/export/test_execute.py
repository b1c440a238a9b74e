"""lab.export.execute_notebook shuts down the kernel it starts, whether the notebook runs through or a cell fails."""
from __future__ import annotations

import os

import nbformat
import psutil
import pytest
from nbclient.exceptions import CellExecutionError

from lab.export import execute_notebook


def _notebook(*sources):
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])


def _kernel_pid(nb) -> int:
    return int(nb.cells[0].outputs[0]["text"])


def _kernels_of_this_process():
    return [p for p in psutil.Process().children(recursive=True)
            if any("ipykernel" in part for part in _cmdline(p))]


def _cmdline(process):
    try:
        return process.cmdline()
    except psutil.Error:  # ended while we looked
        return []


def test_two_executions_leave_no_kernel_running(tmp_path):
    before = {p.pid for p in _kernels_of_this_process()}
    ok = execute_notebook(_notebook("import os; print(os.getpid())", "x = 1 + 1"), tmp_path, timeout=60)
    failing = _notebook("import os; print(os.getpid())", "raise ValueError('this cell fails')")
    with pytest.raises(CellExecutionError, match="this cell fails"):
        execute_notebook(failing, tmp_path, timeout=60)
    pids = [_kernel_pid(ok), _kernel_pid(failing)]
    assert pids[0] != pids[1]  # two kernels were started ...
    alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"kernels {alive} still run after execute_notebook returned"  # ... and both were shut down
    assert {p.pid for p in _kernels_of_this_process()} <= before


@pytest.mark.skipif(os.name != "posix", reason="Unix sockets")
def test_the_kernel_talks_over_unix_sockets_not_tcp_ports(tmp_path):
    """TCP ports picked free by the client can be taken before the kernel binds them (two test workers starting
    kernels and servers at once did): the kernel's heartbeat failed to bind and the client waited for ever."""
    nb = execute_notebook(_notebook("from ipykernel.kernelapp import IPKernelApp\n"
                                    "print(IPKernelApp.instance().transport)"), tmp_path, timeout=60)
    assert nb.cells[0].outputs[0]["text"].strip() == "ipc"
