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


# ---- output files ---------------------------------------------------------------------------
def check_output(path: str, flag: str, plot: bool = False) -> None:
    """Refuse an output path that cannot be written before any work is done: a directory, a
    missing directory, or (`plot`) a file type matplotlib cannot write. InputError naming
    `flag` and the path."""
    from pathlib import Path
    from perfmodel.errors import InputError
    p = Path(path)
    try:
        if p.is_dir():
            raise InputError(f"{flag} {path}: is a directory (expected a file path)")
        parent = p.parent
        if not parent.is_dir():
            raise InputError(f"{flag} {path}: no such directory '{parent}'")
    except (OSError, ValueError) as e:  # a name too long for the file system, a NUL byte
        raise InputError(f"{flag} {path}: not a usable path ({e})") from None
    if plot:
        from matplotlib.backend_bases import FigureCanvasBase
        kinds = FigureCanvasBase.get_supported_filetypes()
        suffix = p.suffix.lstrip(".").lower()
        if suffix and suffix not in kinds:
            raise InputError(f"{flag} {path}: cannot write a '.{suffix}' image (expected one of "
                             f"{', '.join('.' + k for k in sorted(kinds))})")


def write_output(path: str, text: str, flag: str) -> None:
    """Write `text` to `path`; InputError naming `flag` where it cannot be written."""
    from pathlib import Path
    from perfmodel.errors import InputError
    check_output(path, flag)
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise InputError(f"{flag} {path}: cannot write ({e.strerror or e})") from None


class writing:
    """`with writing(path, "--plot"):` around code that saves a file (matplotlib's savefig):
    an OSError becomes an InputError naming the flag and the path."""

    def __init__(self, path: str, flag: str):
        self.path, self.flag = path, flag

    def __enter__(self):
        check_output(self.path, self.flag, plot=True)
        return self

    def __exit__(self, kind, e, tb):
        if kind is not None and issubclass(kind, OSError):
            from perfmodel.errors import InputError
            raise InputError(f"{self.flag} {self.path}: cannot write "
                             f"({e.strerror or e})") from None
        return False
