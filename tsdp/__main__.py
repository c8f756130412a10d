from tsdp.cli.app import run

run()
