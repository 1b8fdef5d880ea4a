"""`python -m webgym_cli ...`: how the pipeline's processes are started."""

from webgym_cli.main import app

app(prog_name="webgym")
