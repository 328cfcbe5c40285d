"""What a person reads on a terminal: the report's sections in their terminal forms, and what
only a terminal shows.

`sections` is the one walk: a command prints the records it holds with `render_records` (and a
run folder prints with `render_sections`), each registered section printing its view in the
terminal form it names (report/registry.py, report/sections/). Those forms live here when they
are rich tables of a typed record: `tune` (the result, within it the ladder, the Pareto front
and the memory ladder), `diagnosis` (the verdict, the findings within it), `steps` (a trace
`analysis` with the roofline's top ops and the ranks, else a `run`), `env` (the environment).
Outputs with no report section are printed here too: `bench`, `profile`, `recheck`,
`script_run`, `workloads`, and the live views while `tune`, `demo`, `scale` and `serve` run
(`live`, `live_stages`). `--json` prints the record instead and never imports them.

Nothing is imported here, so that printing one command's tables loads only its modules.
"""
