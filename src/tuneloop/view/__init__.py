"""The flywheel's dashboard over a ledger and its runs (`tuneloop view`).

    tuneloop view loop.yaml --serve          # view/app.py: local, read-only web app
    tuneloop view loop.yaml --bundle DIR     # view/bundle.py: static site, opens from disk

`sources.py` finds the ledger, archives and workdir; `history.py` reads them typed into a
`Dashboard`; `page.py` renders it with the report page's machinery (report/html.py, svg.py,
templates/dashboard.html.j2). It sits beside `flywheel` in the dependency direction: it reads
what the phases (gate, report) and the flywheel (watch state) wrote, and no phase imports it.
"""
