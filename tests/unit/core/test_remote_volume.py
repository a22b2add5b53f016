"""How a task's URI is read (peloton/core/remote_volume.py): every scheme and archive suffix
of the tables, checksums in the fragment, where the run sees it, and what is refused."""

from __future__ import annotations

import pytest

from peloton.core.errors import InvalidArgument
from peloton.core.model.task import UriSpec
from peloton.core.remote_volume import (
    ARCHIVES,
    SCHEMES,
    FetchKind,
    archive_suffix,
    mismatch,
    remote_volume,
    remote_volumes,
    unfetchable,
)

DIGEST = "ab" * 32


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_every_scheme_of_the_table_is_read(scheme: str) -> None:
    host = "" if SCHEMES[scheme] is FetchKind.FILE else "example.invalid"
    value = f"{scheme}://{host}/srv/conf/app.json" if scheme else "/srv/conf/app.json"
    vol = remote_volume(UriSpec(value, cache=True))
    assert (vol.kind, vol.path, vol.cache, vol.archive) == (SCHEMES[scheme], "app.json", True,
                                                            None)
    # Our agent fetches what it has a client for; the Mesos fetcher's others fail a run on it.
    why = unfetchable(vol)
    assert (why is None) == (SCHEMES[scheme] is not FetchKind.MESOS)
    if why is not None:
        assert why.startswith(f"URI {value}: {scheme} is fetched only by the Mesos fetcher")


def test_an_absolute_path_is_a_file_url_as_the_mesos_fetcher_takes_it() -> None:
    vol = remote_volume(UriSpec("/usr/share/aurora/thermos_executor.pex", executable=True))
    assert (vol.url, vol.kind, vol.path, vol.executable) == (
        "file:///usr/share/aurora/thermos_executor.pex", FetchKind.FILE,
        "thermos_executor.pex", True)


@pytest.mark.parametrize("suffix", sorted(ARCHIVES))
def test_every_archive_suffix_is_unpacked_into_a_directory_named_without_it(suffix: str) -> None:
    vol = remote_volume(UriSpec(f"https://h.invalid/data-v1{suffix}"))
    assert (vol.path, vol.archive) == ("data-v1", ARCHIVES[suffix])
    # Not extracted: the file itself, under its own name.
    kept = remote_volume(UriSpec(f"https://h.invalid/data-v1{suffix}", extract=False))
    assert (kept.path, kept.archive) == (f"data-v1{suffix}", None)


def test_longest_archive_suffix_wins() -> None:
    assert archive_suffix("x.tar.gz") == ".tar.gz"
    assert archive_suffix("x.gz") is None and archive_suffix(".tar") is None


def test_checksum_rides_in_the_fragment_and_is_not_fetched() -> None:
    vol = remote_volume(UriSpec(f"http://h.invalid/v1.txt#sha256={DIGEST.upper()}",
                                output_file="etc/conf.txt"))
    assert (vol.url, vol.sha256, vol.path) == ("http://h.invalid/v1.txt", DIGEST, "etc/conf.txt")
    assert mismatch(vol, DIGEST) is None
    assert mismatch(vol, "00" * 32) == (f"remote volume http://h.invalid/v1.txt: sha256 "
                                        f"mismatch: expected {DIGEST}, fetched {'00' * 32}")
    assert mismatch(remote_volume(UriSpec("http://h.invalid/x")), "00" * 32) is None


def test_the_cache_key_tells_apart_what_is_presented_differently() -> None:
    plain = remote_volume(UriSpec("http://h.invalid/a.tar", cache=True, extract=False))
    unpacked = remote_volume(UriSpec("http://h.invalid/a.tar", cache=True))
    other_place = remote_volume(UriSpec("http://h.invalid/a.tar", cache=True, extract=False,
                                        output_file="b"))
    assert plain.cache_key != unpacked.cache_key
    assert plain.cache_key == other_place.cache_key  # where a run sees it is not the content


@pytest.mark.parametrize(("value", "output", "why"), [
    ("gopher://h.invalid/x", "", "scheme must be one of file, ftp, ftps, hdfs, hftp, http, "
                                 "https, s3, s3a, s3n"),
    ("relative/x", "", "a path must be absolute"),
    ("file://otherhost/x", "", "names a path on the host"),
    ("http:///x", "", "names no host"),
    ("http://h.invalid/x#md5=00", "", "#sha256=<64 hex digits>"),
    ("http://h.invalid/x#sha256=abc", "", "#sha256=<64 hex digits>"),
    ("http://h.invalid/", "", "give it an outputFile"),
    ("http://h.invalid/x", "../up", "inside the sandbox"),
])
def test_what_cannot_be_fetched_is_refused(value: str, output: str, why: str) -> None:
    with pytest.raises(InvalidArgument, match=why.replace("(", r"\(")) as err:
        remote_volume(UriSpec(value, output_file=output), "command.uris[2]")
    assert err.value.field == "command.uris[2]"


def test_two_uris_may_not_land_on_the_same_path() -> None:
    with pytest.raises(InvalidArgument, match="both land at 'a'") as err:
        remote_volumes((UriSpec("http://h.invalid/a"), UriSpec("file:///srv/b", output_file="a")))
    assert err.value.field == "command.uris[1]"
