"""Number formatting shared by the commands' text output, and the options every command that
chooses a GPU takes."""
from __future__ import annotations

SM_CLOCK_HELP = ("lock the SM clock, e.g. 1500MHz or 1.5GHz (as nvidia-smi -lgc; at most the "
                 "GPU's max boost): every SM-clocked rate follows it")


def add_sm_clock_option(parser) -> None:
    """`--sm-clock 1500MHz`: the locked SM clock of the chosen GPU."""
    parser.add_argument("--sm-clock", metavar="CLOCK", help=SM_CLOCK_HELP)


def resolve_hardware(name, sm_clock: str | None):
    """The GPU named by --hw (a name, alias or spec path; or a Hardware), with --sm-clock's lock;
    bad values are one-line input errors naming the flag."""
    from perfmodel.errors import InputError
    from perfmodel.hardware import hardware, parse_clock_hz
    hz = parse_clock_hz(sm_clock, "--sm-clock") if sm_clock is not None else None
    hw = hardware(name)
    try:
        return hw.locked(hz)
    except InputError as e:
        raise InputError([f"--sm-clock: {p}" for p in e.problems]) from None


def fmt_si(x: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {prefix}{unit}"
    return f"{x:.4g} {unit}"
