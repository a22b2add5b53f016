"""Alembic environment for Peloton's SQL schema, driven programmatically.

migrations/sql_runner.py hands over an open connection in
`config.attributes["connection"]` (there is no alembic.ini and no URL in
any file): the runner has already set the connection up the way the
store does (SQLite pragmas, psycopg 3 driver).  `render_as_batch` lets
future migrations alter SQLite tables (which has no ALTER COLUMN).
"""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
