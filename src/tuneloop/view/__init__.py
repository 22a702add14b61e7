"""The flywheel's dashboard over a ledger and its runs (`tuneloop view`).

    tuneloop view loop.yaml --serve          # view/app.py: local, read-only web app
    tuneloop view loop.yaml --bundle DIR     # view/bundle.py: static site, opens from disk

`sources.py` finds the ledger, archives and workdir; `history.py` reads them typed into a
`Dashboard`; `page.py` renders it through its own template environment
(`templates/dashboard.html.j2`, sharing report.html's stylesheet and number filters and
`report/svg.py`'s charts). It sits above `flywheel` in the dependency direction: it reads what
the phases (gate, report), the loop (the run layout) and the flywheel (the watcher's state and
its records, `tuneloop.flywheel`) wrote; only the CLI imports it.
"""
