from webgym_common.cli import app

app(prog_name="webgym")
