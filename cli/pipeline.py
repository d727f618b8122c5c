"""``commitgate pipeline ...``: the Spark pipeline of pipeline/ (needs the ``pipeline`` extra)."""
from __future__ import annotations

import typer

pipeline_app = typer.Typer(help="The Spark pipeline (pip install -e '.[pipeline]').",
                           no_args_is_help=True)


@pipeline_app.command(
    "demo", add_help_option=False,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    help="The reference pipeline: click events, a Structured Streaming job counting clicks per "
         "page in event-time windows, a live result table (the same as python -m "
         "pipeline.demo; --help lists its options).")
def demo(ctx: typer.Context) -> None:
    try:  # PySpark is imported only now: the broker's own commands do not need it
        from commitgate.pipeline.demo import app as demo_app
    except ImportError as exc:
        typer.echo(f"the pipeline needs its extra: pip install -e '.[pipeline]' ({exc})", err=True)
        raise typer.Exit(2) from None
    demo_app(args=ctx.args, prog_name="commitgate pipeline demo")
