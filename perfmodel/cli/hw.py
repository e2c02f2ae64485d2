"""`perfmodel hw`: the built-in hardware catalogue (`list`) and one resolved spec with its
provenance, ISA capabilities and derived peaks (`show`)."""
from __future__ import annotations

import json

from perfmodel.cli.format import add_sm_clock_option, fmt_si, resolve_hardware
from perfmodel.report.tables import format_table
from perfmodel.spec_headers import builtin_spec_files, header_fields

LIST_COLUMNS = ("name", "architecture", "compute_capability", "aliases", "device_names")


def register(sub) -> None:
    hw = sub.add_parser("hw", help="hardware specs")
    hw.set_defaults(fn=run_list)  # bare `perfmodel hw` lists them (`perfmodel hw list`)
    hwsub = hw.add_subparsers(dest="hw_command", required=False, parser_class=type(hw))
    hwsub.add_parser("list", help="built-in hardware names and aliases").set_defaults(fn=run_list)
    show = hwsub.add_parser("show", help="a resolved spec with derived peaks")
    show.add_argument("name", help="name, alias, driver device name or spec path")
    add_sm_clock_option(show)
    show.add_argument("--format", choices=("table", "json"), default="table")
    show.set_defaults(fn=run_show)


def run_list(args) -> int:
    """The catalogue from each built-in spec's identity lines (perfmodel.spec_headers): no spec
    is parsed, so the listing costs little more than Python's start-up; `hw show` loads one."""
    from perfmodel.errors import InputError
    rows, problems = [], []
    for f in builtin_spec_files():
        try:
            fields = header_fields(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            problems.append(f"{f}: cannot be read as UTF-8 text ({type(e).__name__})")
            continue
        missing = [k for k in LIST_COLUMNS if k not in fields]
        if missing:
            problems.append(f"{f}: {', '.join(missing)}: missing top-level identity line "
                            f"(expected `key: value` at the start of a line)")
            continue
        rows.append([fields["name"], fields["architecture"], fields["compute_capability"],
                     ", ".join(fields["aliases"]), ", ".join(fields["device_names"])])
    if problems:
        raise InputError(problems)
    print(format_table(["name", "arch", "cc", "aliases", "device names"], rows))
    return 0


def run_show(args) -> int:
    hw = resolve_hardware(args.name, args.sm_clock)
    info = hw.summary()
    if args.format == "json":
        print(json.dumps(info, indent=2))
        return 0
    print(f"{hw.name}  ({hw.architecture}, compute capability {hw.compute_capability})")
    print(f"  file: {hw.path}")
    print(f"  aliases: {', '.join(hw.aliases)}")
    rows = []
    for key, q in hw.quantities.items():
        prov = "; ".join(f"{k}: {v}" for k, v in q.provenance.items())
        rng = f"[{q.range[0]:.4g}, {q.range[1]:.4g}]" if q.range else ""
        rows.append([key, f"{q.value:.6g}", rng, prov[:70]])
    print(format_table(["quantity", "value", "range", "provenance"], rows))
    caps = [[key, ", ".join(c.value) if isinstance(c.value, tuple) else str(c.value).lower(),
             "; ".join(f"{k}: {v}" for k, v in c.provenance.items())[:70]]
            for key, c in hw.capabilities.items()]
    print("\n" + format_table(["capability", "value", "provenance"], caps))
    print(f"\nNVLink domain: {hw.nvlink_domain_gpus} GPUs (topology.nvlink_domain_gpus); "
          f"collectives over more GPUs cross links.network")
    d = info["derived"]
    print("\nderived:")
    for dt, peak in d["tensor_peak_flop_per_s"].items():
        print(f"  tensor {dt:6s} {fmt_si(peak, 'FLOP/s'):>16}   ridge "
              f"{d['ridge_point_flop_per_byte'][dt]:7.1f} FLOP/byte")
    print(f"  fp32 (FMA pipe)  {fmt_si(d['fp32_peak_flop_per_s'], 'FLOP/s')}")
    print(f"  HBM achievable   {fmt_si(d['hbm_achievable_bandwidth_bytes_per_s'], 'B/s')}")
    print(f"  shared memory    {fmt_si(d['smem_aggregate_bandwidth_bytes_per_s'], 'B/s')}")
    print(f"  MUFU/XU          {fmt_si(d['xu_peak_per_s'], 'op/s')}")
    lock = f" (locked at {hw.sm_clock_hz / 1e6:.0f} MHz)" if hw.sm_clock_hz else ""
    print(f"  SM clock         {d['max_sm_clock_hz'] / 1e6:.0f} MHz without tensor work{lock}, "
          f"{d['sustained_sm_clock_hz'] / 1e6:.0f} MHz under sustained MMA load")
    if info["assumed"]:
        print(f"\nassumed (not sourced; ranges given): {', '.join(info['assumed'])}")
    return 0
