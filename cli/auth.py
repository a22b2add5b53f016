"""`peloton auth hash-password | whoami` and `peloton login | logout`: credentials of the CLI.

`peloton login` asks the cluster for a login token with a username and
password (Peloton's BASIC scheme) and keeps it in ~/.peloton/tokens.yaml
(mode 0600; `$PELOTON_TOKEN_FILE` moves it), per job manager address; every
later command to that cluster sends it as `authorization: Bearer <token>`.
`--basicAuthConfig FILE` (the original CLI's `username`/`password` YAML)
still works and wins over a stored token.
"""

from __future__ import annotations

import getpass
import os
import sys
import time
from pathlib import Path

import click
import yaml

from cli import context
from peloton.common.auth.passwords import hash_password

DEFAULT_TOKEN_FILE = Path.home() / ".peloton" / "tokens.yaml"


def token_file() -> Path:
    """Where login tokens are kept."""
    return Path(os.environ.get("PELOTON_TOKEN_FILE") or DEFAULT_TOKEN_FILE)


def load_tokens(path: Path | None = None) -> dict[str, dict[str, object]]:
    """jobmgr address -> {token, user, expires}; {} when there is no file."""
    path = path or token_file()
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as exc:
        raise click.UsageError(f"cannot read {path}: {exc}") from None
    return {str(k): v for k, v in doc.items() if isinstance(v, dict)} if isinstance(doc, dict) else {}


def save_tokens(tokens: dict[str, dict[str, object]], path: Path | None = None) -> None:
    """Write the token file with mode 0600 (replacing it, never through a symlink)."""
    path = path or token_file()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(tokens, fh)
    os.replace(tmp, path)


def stored_token(jobmgr: str) -> str:
    """The unexpired login token kept for the job manager at `jobmgr` ("" if none)."""
    entry = load_tokens().get(jobmgr)
    if not entry or float(str(entry.get("expires", 0))) <= time.time():
        return ""
    return str(entry.get("token", ""))


@click.command("login")
@click.option("--username", "-U", default=lambda: getpass.getuser(), show_default="$USER",
              help="The user to log in as.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option("--ttl", default="0", help="How long the token should live (e.g. 8h; default and "
              "maximum: the cluster's token lifetime).")
def login(username: str, password_stdin: bool, ttl: str) -> None:
    """Log in to the cluster: keep a token for later commands.

    \b
    Example:
      peloton login -U alice
      echo "$PW" | peloton -m cluster:5392 login -U ci --password-stdin
    """
    from cli.params import parse_duration

    password = (sys.stdin.readline().rstrip("\n") if password_stdin
                else click.prompt("Password", hide_input=True))
    settings = context.settings()
    client = settings.client().with_headers({"username": username, "password": password})
    reply = client.login(parse_duration(ttl))
    tokens = load_tokens()
    tokens[client.endpoints.jobmgr] = {"token": reply.token, "user": reply.username,
                                       "expires": reply.expires}
    save_tokens(tokens)
    until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(reply.expires))
    out = context.out()
    out.line(f"logged in to {client.endpoints.jobmgr} as {reply.username} (role {reply.role})")
    out.line(f"token valid until {until}, kept in {_shown(token_file())}")


def _shown(path: Path) -> str:
    """`path` with the home directory written as `~`."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


@click.command("logout")
def logout() -> None:
    """Forget the token of this cluster.

    \b
    Example:
      peloton logout
    """
    jobmgr = context.settings().client().endpoints.jobmgr
    tokens = load_tokens()
    if tokens.pop(jobmgr, None) is not None:
        save_tokens(tokens)
    context.out().line(f"logged out of {jobmgr}")


@click.group("auth")
def auth() -> None:
    """Credentials: password hashes for the users file, who the cluster thinks you are.

    \b
    Example:
      peloton auth hash-password   # its output goes in the users file's password_hash
      peloton auth whoami
    """


@auth.command("hash-password")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the password from standard input.")
def hash_password_command(from_stdin: bool) -> None:
    """Print the salted scrypt hash of a password, for `password_hash:` in a users file.

    \b
    Example:
      peloton auth hash-password
      echo "$PW" | peloton auth hash-password --stdin
    """
    if from_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.UsageError("the password is empty")
    click.echo(hash_password(password))


@auth.command("whoami")
def whoami() -> None:
    """Who the cluster takes you for (user, role, how you proved it).

    \b
    Example:
      peloton auth whoami
    """
    reply = context.client().whoami()
    if not reply.auth_enabled:
        context.out().line("authentication is off on this cluster: every caller may do everything")
        return
    context.out().line(f"{reply.username or '(default user)'} (role {reply.role}, by {reply.method})")
