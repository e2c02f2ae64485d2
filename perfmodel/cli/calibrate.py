"""`perfmodel calibrate`: refit the named constants, cross-validate them by source, and write
perfmodel/fitted.yaml and perfmodel/accuracy.yaml (perfmodel.validation.calibrate)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from perfmodel.errors import InputError


def register(sub) -> None:
    c = sub.add_parser("calibrate", help="refit the fitted constants on their rows, "
                       "cross-validate by source, write fitted.yaml and accuracy.yaml")
    c.add_argument("--check", action="store_true", help="write nothing; exit 1 if "
                   "fitted.yaml or accuracy.yaml differs from a fresh calibration")
    c.add_argument("--format", choices=("table", "json"), default="table")
    c.add_argument("--readme", metavar="README.md", help="also rewrite the accuracy block of "
                   "this README (between its accuracy-table markers)")
    c.set_defaults(fn=run_calibrate)


def run_calibrate(args) -> int:
    from perfmodel import fitted, intervals
    from perfmodel.predict import clear_cache
    from perfmodel.validation import calibrate as cal_mod
    from perfmodel.validation import fit
    readme = Path(args.readme) if args.readme else None
    if readme is not None:
        try:
            text = readme.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"--readme: cannot read {readme} ({e})") from None
        if cal_mod.README_BEGIN not in text or cal_mod.README_END not in text:
            raise InputError(f"--readme: {readme} has no accuracy block (the lines "
                             f"'{cal_mod.README_BEGIN}' and '{cal_mod.README_END}')")
    cal = cal_mod.calibrate(progress=sys.stderr.isatty())
    doc = cal_mod.accuracy_document(cal)
    fitted_text, accuracy_text = fit.render(cal.entries), cal_mod.render(doc)
    outputs = [(fitted.PATH, fitted_text), (cal_mod.ACCURACY_PATH, accuracy_text)]
    if readme is not None:
        outputs.append((readme, cal_mod.update_readme(text, doc)))
    if args.check:
        stale = [str(p) for p, t in outputs if not p.is_file() or p.read_text() != t]
        for p in stale:
            print(f"{p}: differs from a fresh calibration", file=sys.stderr)
        if not stale:
            print("fitted constants and accuracy table match a fresh calibration")
        return 1 if stale else 0
    for path, text_out in outputs:
        try:
            path.write_text(text_out, encoding="utf-8")
        except OSError as e:
            raise InputError(f"{path}: cannot write ({e.strerror})") from None
    intervals.reload()
    clear_cache()  # memoized Estimates carry the bands just rewritten
    if args.format == "json":
        print(json.dumps(doc, indent=2))
    else:
        print(cal_mod.table_text(doc))
        print("\nrefitted without their own rows: " + ", ".join(
            f"{s} ({len(ids)})" for s, ids in doc["folds"].items()))
        print("wrote " + ", ".join(str(p) for p, _ in outputs))
    return 0
