"""Subcommands imported only when they run: ``tsdp --help`` and option parsing stay light.

Cron jobs and CI gates start tsdp many times; importing every subcommand (and through them
polars, scipy and numpy) cost about 0.4 s per start. The root group lists the subcommands from
the table below and imports a subcommand's module only when that subcommand is invoked (or its
own help is asked for). Each subcommand is built exactly as an eager ``add_typer``/``command``
registration on the root app would build it, so its options, help and errors do not change.

``SUBCOMMANDS`` keeps the one-line help shown by ``tsdp --help``; a test checks that it matches
the help of the loaded command.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

import typer
from typer.core import TyperGroup

# name -> (module, attribute, one-line help as Click derives it from the command's help text).
# Order is the order of `tsdp --help`: commands first, then the command groups.
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "release": ("tsdp.cli.release", "release",
                "Release a series or a panel of series with calibrated Gaussian or Laplace noise."),
    "mean-estimate": ("tsdp.cli.mean", "mean_estimate",
                      "User-level private mean of bounded values per cell and time slot (Gupta et al."),
    "flip": ("tsdp.cli.flip", "flip",
             "FLIP: filter each series with a secret random all-pass filter (McElroy, Roy & Hore 2022)."),
    "forecast-train": ("tsdp.cli.forecast", "forecast_train",
                       "Train a probabilistic forecasting model with DP-SGD (Schuchardt et al."),
    "plan": ("tsdp.cli.plan", "app",
             "Accuracy against budget before touching data: a command's dry run at several epsilons."),
    "account": ("tsdp.cli.account", "app",
                "Privacy accounting: DP-SGD with structured subsampling, calibration, composition, verification."),
    "ledger": ("tsdp.cli.ledger", "ledger_app",
               "Privacy budget ledger: a total (epsilon, delta) per dataset and every release charged to it."),
    "stream": ("tsdp.cli.stream", "app",
               "Continual release: fix a stream once (budget charged once), then append each new step from cron."),
}


def load_subcommand(name: str, settings: Mapping[str, Any]):
    """Import subcommand ``name`` and build its Click command as the root app would."""
    module, attribute, _ = SUBCOMMANDS[name]
    from tsdp.cli.vocabulary import VocabularyCommand

    target = getattr(importlib.import_module(module), attribute)
    root = typer.Typer(**settings)
    if isinstance(target, typer.Typer):
        root.add_typer(target, name=name)  # its commands declare cls=VocabularyCommand themselves
    else:
        root.command(name, cls=VocabularyCommand)(target)
    root.callback()(lambda: None)  # a group, so that the command keeps its own name
    return typer.main.get_command(root).commands[name]


class _LazyCommands(Mapping):
    """The root group's ``commands``: every name is known, a command is built on first access."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._settings = settings
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str):
        if name not in SUBCOMMANDS:
            raise KeyError(name)
        if name not in self._loaded:
            self._loaded[name] = load_subcommand(name, self._settings)
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(SUBCOMMANDS)

    def __len__(self) -> int:
        return len(SUBCOMMANDS)


def lazy_group(settings: Mapping[str, Any]) -> type[TyperGroup]:
    """A root group class whose subcommands load on demand (``settings``: the root Typer's)."""

    class LazyGroup(TyperGroup):
        def __init__(self, **attrs: Any) -> None:
            super().__init__(**attrs)
            self.commands = _LazyCommands(settings)  # type: ignore[assignment]

        def format_commands(self, ctx, formatter) -> None:
            """The command list from the table: listing must not import every subcommand."""
            from typer._click.utils import make_default_short_help

            limit = formatter.width - 6 - max(len(name) for name in SUBCOMMANDS)
            rows = [(name, make_default_short_help(text, limit)) for name, (_, _, text) in SUBCOMMANDS.items()]
            with formatter.section("Commands"):
                formatter.write_dl(rows)

        def shell_complete(self, ctx, incomplete: str):
            """Shell completion of ``tsdp <TAB>`` from the table: completing a subcommand's name
            must not import every subcommand (and polars with them); options complete as usual."""
            from typer._click.shell_completion import CompletionItem

            names = [CompletionItem(name, help=text) for name, (_, _, text) in SUBCOMMANDS.items()
                     if name.startswith(incomplete)]
            return names + super(TyperGroup, self).shell_complete(ctx, incomplete)

    return LazyGroup
