"""Where the Python benches keep their figures: bench/results/NAME.md, rewritten by each full run.

    with bench_results.recorded("models_bench", args.results):
        print(table)                    # to the terminal and to the file

The file starts with the command line, the date, the commit and the machine, so a figure in it can
be reproduced; docs link to these files instead of copying figures. A run that fails or is
interrupted leaves the previous file in place (the new one is kept in memory and written at the
end).
"""
import contextlib
import datetime
import io
import os
import platform
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS_DIR = os.path.join(HERE, "results")


def default_path(name):
    return os.path.join(RESULTS_DIR, f"{name}.md")


def _git(*args):
    out = subprocess.run(["git", "-C", HERE, *args], capture_output=True, text=True, timeout=10)
    return out.stdout.strip() if out.returncode == 0 else None


def _commit():
    """The commit that ran, "-dirty" when code differs from it: changes under bench/results (the
    files benches write, often during the run itself) do not count."""
    try:
        head = _git("rev-parse", "--short", "HEAD")
        if not head:
            return "unknown"
        changed = _git("status", "--porcelain", "--", ":/", ":(exclude,top)bench/results")
        return head + ("-dirty" if changed else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance():
    """Markdown list lines naming how this run's figures were made: command, date, commit,
    machine."""
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = "absent"
    command = " ".join(shlex.quote(a) for a in ["./scripts/python"] + sys.argv)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"- command: `{command}`\n- date: {when}\n- commit: {_commit()}\n"
            f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}, torch {torch_version}\n")


def header(name, writer=None):
    """Markdown lines naming how the figures below were made; `writer` (Markdown) names the program
    that wrote them (default `bench/NAME.py`)."""
    return (f"# {name}\n\nWritten by {writer or f'`bench/{name}.py`'}; do not edit by hand.\n\n"
            f"{provenance()}\n")


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)
        return len(text)

    def flush(self):
        for s in self.streams:
            s.flush()


@contextlib.contextmanager
def recorded(name, path, writer=None):
    """Copies standard output into `path` (None: no file) below a header; the file is written
    only when the block ends without an exception (an interrupted run leaves the old one)."""
    if path is None:
        yield
        return
    text = io.StringIO()
    text.write(header(name, writer))
    stdout = sys.stdout
    sys.stdout = _Tee(stdout, text)
    try:
        yield
    finally:
        sys.stdout = stdout
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text.getvalue())
    os.replace(tmp, path)
    print(f"{name}: figures written to {path}", file=sys.stderr)
