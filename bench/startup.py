"""Start-up time of the commands cron jobs and CI gates call many times (issue 14).

Times, interleaved round by round in fresh processes, with the two references in the same run:

* reference `python -c pass` (the interpreter alone),
* reference `python -c "import polars, numpy, scipy.special"` (the floor of any command that
  reads a table),
* `tsdp --help`, `tsdp account verify REPORT` (one report of a tiny release) and a tiny release
  (5 rows, Gaussian, CSV in and out).

Prints the median of each, the median ratio to its reference with the spread of the per-round
ratios, and PASS/FAIL against the targets: --help <= 0.15 s, verify <= 0.5 s, release <= 0.6 s
(medians). The targets were set on a quiet machine where `python -c pass` took 0.025 s and the
import floor 0.36 s; when this run's reference is slower (other work on the machine), the target
is scaled by the same factor and the scaled figure is printed next to it. Exit status 1 if a target
is missed.
Usage: python bench/startup.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from timing import command, paired, verdict  # noqa: E402  (bench/timing.py, beside this script)

TARGETS = {"tsdp --help": 0.15, "tsdp account verify": 0.5, "tiny release": 0.6}
QUIET = {"python -c pass": 0.025, "import polars, numpy, scipy.special": 0.36}  # the references
RELEASE = ["--epsilon", "1", "--delta", "1e-6", "--unit", "event", "--time-col", "time", "--value-col", "value",
           "--clip-min", "0", "--clip-max", "10", "-q"]


def tsdp_command() -> list[str]:
    """The installed `tsdp` script beside this interpreter, else `python -m tsdp`."""
    script = Path(sys.executable).with_name("tsdp")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tsdp"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    tsdp = tsdp_command()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # this checkout's tsdp
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tiny.csv").write_text("time,value\n" + "".join(f"2024-01-0{d},{d}\n" for d in range(1, 6)))
        command([*tsdp, "release", "tiny.csv", *RELEASE, "-o", "published.csv"], env, tmp)()
        runs = {
            "python -c pass": command([sys.executable, "-c", "pass"], env, tmp),
            "import polars, numpy, scipy.special": command(
                [sys.executable, "-c", "import polars, numpy, scipy.special"], env, tmp),
            "tsdp --help": command([*tsdp, "--help"], env, tmp),
            "tsdp account verify": command([*tsdp, "account", "verify", "published.report.json", "-q"], env, tmp),
            "tiny release": command([*tsdp, "release", "tiny.csv", *RELEASE, "-o", "out.csv", "--force"], env, tmp),
        }
        result = paired(runs, args.rounds)
    print(f"start-up, {args.rounds} interleaved rounds in fresh processes (median wall time)")
    references = {"tsdp --help": "python -c pass", "tsdp account verify": "import polars, numpy, scipy.special",
                  "tiny release": "import polars, numpy, scipy.special"}
    for name in ("python -c pass", "import polars, numpy, scipy.special"):
        print(f"  reference {name:<27} {result.median(name):7.3f} s")
    ok = True
    for name, target in TARGETS.items():
        ref = references[name]
        load = max(1.0, result.median(ref) / QUIET[ref])
        passed = result.median(name) <= target * load
        ok &= passed
        scaled = "" if load == 1.0 else f" (x{load:.2f} for this run's load: {target * load:.3f} s)"
        print(f"  {name:<37} {result.median(name):7.3f} s   {result.ratio(name, ref):5.2f}x '{ref}' "
              f"({result.spread(name, ref)})   target <= {target:g} s{scaled}: {verdict(passed)}")
    print("all targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
