"""What a person reads on a terminal: rich renderables of the stages' records, one module per
command (bench, run, analysis, diagnosis, env, profile, tune, workloads). The CLI computes the
record and calls these to print it; `--json` prints the record instead and never imports them.
`sections` prints the registered report sections that have a terminal form (report/registry.py).

Nothing is imported here, so that printing one command's tables loads only its module.
"""
