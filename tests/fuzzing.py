"""What the fuzz suites share (tests/test_fuzz_*.py): the per-test example budget under the
hypothesis profile, the in-process CLI run that checks the exit-code contract, and the values
that broke something once.

    from tests.fuzzing import cli, fuzz      # run from the repository root

Budgets: a test names its examples for the `ci` profile; `fuzz` scales them by the profile's
max_examples over ci's 100, so `HYPOTHESIS_PROFILE=nightly` (2000) runs 20x as many, fresh ones.
"Dirty" (issue 42): a traceback or an exception other than InputError, a non-finite number, an
exit code other than 0/2, or exit 0 on input known to be invalid; every helper here fails the
example on each of them. Runaway sizes are refused by the inputs' declared bounds, which the
suites assert as InputErrors; how long a run takes is measured by benchmarks/speed_report.py, not
asserted here (a timed assertion depends on the machine).
"""
from __future__ import annotations

import contextlib
import io
import json
import math

from hypothesis import HealthCheck, event, settings

CI_EXAMPLES = 100  # the ci profile's max_examples (tests/conftest.py)


def scale() -> int:
    """The profile's example multiplier: 1 in ci, 20 in nightly."""
    return max(1, settings.default.max_examples // CI_EXAMPLES)


def fuzz(examples: int) -> settings:
    """The profile's settings (derandomized in CI) with `examples` examples per ci run, times
    the profile's multiplier."""
    return settings(max_examples=examples * scale(),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# Values that broke something once or sit on a boundary, as Python values
NUMBERS = [0, -1, 1, 2, 3, 7, 0.5, -0.0, 64.5, 1e-300, 5e-324, 1e308, 1e30, 2 ** 31, 2 ** 40,
           2 ** 40 + 1, 2 ** 63, 10 ** 400, -10 ** 400, math.nan, math.inf, -math.inf]
JUNK = [True, False, None, "x", "", "8", "1e3", [1], [], {"a": 1}, {}]


def cli(*argv) -> tuple[int, str, list[str]]:
    """One in-process run of `perfmodel ARGV`: (exit code, stdout, stderr lines). An exception
    escaping main fails the example; so does an exit code other than 0 or 2, a stderr line that
    is not `perfmodel: error|warning|note: ...`, or exit 2 without an error line."""
    from perfmodel.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    lines = err.getvalue().splitlines()
    assert code in (0, 2), (argv, code)
    assert all(line.startswith(("perfmodel: error: ", "perfmodel: warning: ",
                                "perfmodel: note: ")) for line in lines), lines
    errors = [line for line in lines if line.startswith("perfmodel: error: ")]
    assert (code == 2) == bool(errors), (code, lines)
    from hypothesis.control import currently_in_test_context
    if currently_in_test_context():  # (also called from plain tests)
        event("exit 0" if code == 0 else "exit 2")
    return code, out.getvalue(), lines


def no_nan(text: str):
    """JSON with no NaN or Infinity (json.loads takes them by default)."""
    def refuse(name):
        raise AssertionError(f"non-finite number {name} in the JSON output")
    return json.loads(text, parse_constant=refuse)


def finite_numbers(value, where: str = "result") -> None:
    """Every number in `value` (dicts, lists, tuples, dataclass-like to_dict() results) is
    finite; fails the example naming the path of the first that is not."""
    stack = [(value, where)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, dict):
            stack += [(x, f"{at}.{k}") for k, x in v.items()]
        elif isinstance(v, (list, tuple)):
            stack += [(x, f"{at}[{i}]") for i, x in enumerate(v)]
        elif isinstance(v, float):
            assert math.isfinite(v), f"{at} = {v}"


def names(problems, key: str) -> bool:
    """Whether a line of an InputError (or of stderr) names `key` as the thing at fault."""
    return any(key in p for p in problems)
