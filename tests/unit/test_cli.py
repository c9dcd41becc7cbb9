import subprocess
import sys

from vgpu import __version__
from vgpu.cli import main


def test_version_flag_prints_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert __version__ in capsys.readouterr().out


def test_console_script_help_runs_as_a_process():
    out = subprocess.run([sys.executable, "-m", "vgpu", "--help"], capture_output=True, text=True, check=True)
    assert "usage: vgpu" in out.stdout


def test_help_lists_every_subcommand_without_importing_one():
    """`vgpu --help` comes from the static SUBCOMMANDS table: no subcommand module, no daemon, no sim."""
    from vgpu.cli import SUBCOMMANDS

    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vgpu", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    listed = " ".join(out.stdout.split())  # argparse wraps the help column
    for command in SUBCOMMANDS:
        assert f"{command.name} {command.help}" in listed, command.name
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "vgpu.cli" in imported, "no -X importtime output to check"
    loaded = sorted(
        m
        for m in imported
        if m in {c.module for c in SUBCOMMANDS} or m.startswith(("vgpu.sim", "vgpu.plugin", "vgpu.monitor"))
    )
    assert not loaded, f"`vgpu --help` imported {loaded}"


def test_the_chosen_subcommand_is_configured_when_parsed():
    from vgpu.cli import build_parser

    args = build_parser().parse_args(["--log-level", "DEBUG", "monitor", "--no-hami-metrics"])
    assert (args.log_level, args.command, args.hami_metrics) == ("DEBUG", "monitor", False)
    assert callable(args.func)


def test_setting_defaults_are_the_options_dataclass_defaults():
    """Each default is written once: in PluginOptions / MonitorOptions; the settings table copies it."""
    from vgpu.cli import monitor, plugin
    from vgpu.cli.settings import field_default

    for module, options in ((plugin, plugin.PluginOptions), (monitor, monitor.MonitorOptions)):
        for s in module.SETTINGS:
            assert s.default == field_default(options, s.dest), (options.__name__, s.dest)
    by_dest = {m: {s.dest: s for s in m.SETTINGS} for m in (plugin, monitor)}
    for shared in ("hook_path", "device_config", "node_name", "kubeconfig", "nvml_library"):
        assert by_dest[plugin][shared].default == by_dest[monitor][shared].default, shared
    assert by_dest[plugin]["hook_path"].default == "/usr/local/vgpu"


def test_log_options_before_or_after_the_subcommand():
    from vgpu.cli import build_parser

    p = build_parser()
    after = p.parse_args(["plugin", "--log-level", "debug", "--log-format", "JSON"])
    assert (after.log_level, after.log_format) == ("DEBUG", "json")
    before = p.parse_args(["--log-level", "warn", "monitor"])
    assert (before.log_level, before.log_format) == ("WARNING", None)  # None: env, then the default
    both = build_parser().parse_args(["--log-level", "error", "inspect", "--log-level", "info", "x"])
    assert both.log_level == "INFO"  # the value after the subcommand wins
