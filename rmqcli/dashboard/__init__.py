"""``rmq dashboard``: a web console over a cluster (the admin protocol) and store directories.

The server (Starlette on uvicorn, ``app``) serves a page shell and its scripts from ``static/``
(shipped in the wheel, Chart.js among them: nothing is fetched at run time) and JSON endpoints;
every page renders what one endpoint returns, and the cluster's endpoints answer an mqadmin
command's ``--json`` document (``admin_api``), so a page shows what ``rmq <command> --json`` prints.
Read-only unless started with ``--allow-writes``; a write is planned first, then confirmed.
"""
