"""Run the README's examples as a user runs them: each command as written, in order, under a memory bound.

The README marks what a run needs with an HTML comment on the line before a block (invisible on the page):

    <!-- example: skip: why -->                   not run (the test suite itself; needs torch)
    <!-- example: max-steps 20 -->                `--max-steps 20` is added to each train.py command of the
                                                  block (a long reproduction run, shortened; nothing else changes)
    <!-- example: peak 6 GB -->                   this block's bound on peak resident memory (else DEFAULT_PEAK_GB)
    <!-- example: exit 1 -->                      the block's commands are expected to exit 1 (a usage message)
    <!-- example: max-steps 20, peak 6 GB -->     several, separated by commas

Every ``bash`` block is cut into its commands (continuations joined; a ``for``/``while`` loop is one
command) and every ``python`` block is one command (``python3 -c``). Each runs in its own ``bash -c``
with ``set -eo pipefail``; its peak is the largest resident set of any process it started
(``os.wait4``'s rusage), so a command over its bound fails naming itself and its peak.
"""

import dataclasses
import os
import re
import shlex
import signal
import subprocess
import time

DEFAULT_PEAK_GB = 4.0
DEFAULT_TIMEOUT_S = 30 * 60
FENCE = re.compile(r"^(?:<!-- example: (?P<marker>.*?) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)^```", re.S | re.M)
LOOP_START = re.compile(r"^(for|while|until)\b")


@dataclasses.dataclass
class Example:
    line: int           # README line of the block's first code line
    lang: str           # "bash" or "python"
    command: str        # what runs (bash text, or python source)
    peak_gb: float
    max_steps: int = None
    exit_code: int = 0

    def shell(self):
        """The bash text that runs it, with the block's --max-steps added to each train.py command."""
        if self.lang == "python":
            return "python3 -c " + shlex.quote(self.command)
        return add_max_steps(self.command, self.max_steps) if self.max_steps else self.command

    def title(self):
        first = self.command.strip().splitlines()[0]
        return f"README line {self.line}: {first[:100]}"


def parse_marker(text):
    """{'skip': reason or None, 'max_steps': int or None, 'peak_gb': float}"""
    out = {"skip": None, "max_steps": None, "peak_gb": DEFAULT_PEAK_GB, "exit_code": 0}
    if text is None:
        return out
    if text.startswith("skip"):
        out["skip"] = text.partition(":")[2].strip() or "skipped"
        return out
    for part in filter(None, (p.strip() for p in text.split(","))):
        if m := re.fullmatch(r"max-steps (\d+)", part):
            out["max_steps"] = int(m.group(1))
        elif m := re.fullmatch(r"peak (\d+(?:\.\d+)?) GB", part):
            out["peak_gb"] = float(m.group(1))
        elif m := re.fullmatch(r"exit (\d+)", part):
            out["exit_code"] = int(m.group(1))
        else:
            raise ValueError(f"unknown README example marker {part!r} (in <!-- example: {text} -->)")
    return out


def bash_commands(code):
    """The top-level commands of a bash block: continuations joined, comment lines dropped, a loop whole."""
    lines = [line for line in code.replace("\\\n", " ").splitlines() if line.strip() and not line.lstrip().startswith("#")]
    commands, loop, depth = [], [], 0
    for line in lines:
        words = line.strip()
        if depth or LOOP_START.match(words):
            loop.append(line)
            depth += len(re.findall(r"(?:^|;|\s)do\b", words)) - len(re.findall(r"\bdone\b", words))
            if depth <= 0:
                commands.append("\n".join(loop))
                loop, depth = [], 0
        else:
            commands.append(line)
    if loop:
        commands.append("\n".join(loop))
    return commands


def add_max_steps(command, steps):
    """``--max-steps STEPS`` appended to each train.py command of ``command`` (after its last flag, so it
    wins over one already there: argparse keeps the last)."""
    out, count = [], 0
    for line in command.splitlines():
        m = re.search(r"train\.py\b", line)
        if m:
            end = re.search(r"\s(&&|\|\||;|\|)\s", line[m.end():])
            cut = m.end() + end.start() if end else len(line.rstrip())
            line = f"{line[:cut]} --max-steps {steps}{line[cut:]}"
            count += 1
        out.append(line)
    if not count:
        raise ValueError(f"a 'max-steps' marker on a block with no train.py command: {command!r}")
    return "\n".join(out)


def examples(readme_text):
    """(runnable Examples, [(line, reason)] of the skipped blocks), in the README's order."""
    runnable, skipped = [], []
    for m in FENCE.finditer(readme_text):
        lang, code = m.group("lang"), m.group("code")
        line = readme_text.count("\n", 0, m.start("code")) + 1
        marker = parse_marker(m.group("marker"))
        if lang not in ("bash", "python"):
            continue            # a transcript or a layout: nothing to run
        if marker["skip"]:
            skipped.append((line, marker["skip"]))
            continue
        pieces = [code] if lang == "python" else bash_commands(code)
        trains = [lang == "bash" and re.search(r"train\.py\b", piece) is not None for piece in pieces]
        if marker["max_steps"] and not any(trains):
            raise ValueError(f"README line {line}: a 'max-steps' marker on a block with no train.py command")
        # the marker's --max-steps goes to the block's train.py commands; its other commands run as written
        runnable += [Example(line, lang, piece, marker["peak_gb"], marker["max_steps"] if trains_it else None,
                             marker["exit_code"]) for piece, trains_it in zip(pieces, trains)]
    return runnable, skipped


@dataclasses.dataclass
class Result:
    returncode: int
    peak_gb: float
    seconds: float
    output: str


def run_measured(shell, cwd, env, timeout_s=DEFAULT_TIMEOUT_S, log_path=None):
    """Run ``shell`` in bash; its exit code, the peak resident set of its largest process, its seconds and
    output (stdout and stderr together)."""
    log_path = log_path or os.path.join(cwd, ".example-output.log")
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(["bash", "-c", "set -eo pipefail\n" + shell], cwd=cwd, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout_s:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        output = f.read()
    os.remove(log_path)
    # ru_maxrss is in KiB on Linux; GB here and in the README are 10^9 bytes
    return Result(proc.returncode, usage.ru_maxrss * 1024 / 1e9, time.monotonic() - start, output)


def report(rows):
    """A markdown table of (title, peak GB, seconds)."""
    lines = ["| README example | peak RSS | time |", "| --- | ---: | ---: |"]
    lines += [f"| `{title}` | {peak:.2f} GB | {seconds:.0f} s |" for title, peak, seconds in rows]
    return "\n".join(lines)
