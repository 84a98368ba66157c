"""Fetching a dataset's Hugging Face hub copy (the catalogue's ``[dataset.hf]``) into a folder,
for the ``hub_parquet`` adapter to read.

Why a layer over ``huggingface_hub.snapshot_download`` rather than our own downloader: the hub
is a repository, not a URL per file, and huggingface_hub already speaks its API (revisions,
redirects to its storage, Xet, tokens) and keeps in the folder what it fetched (per file, the
commit and ETag under ``<dest>/.cache/huggingface/``), so a second fetch of a complete folder
transfers no file and an interrupted one fetches only the files it lacks. What this module adds:

* the revision is resolved to a commit by one request first and the download asked for that
  commit, so an unreachable hub is an error rather than huggingface_hub's silent fallback to
  whatever the folder holds, and a moved branch is seen;
* by default only the files of the configured config and split (and the image config) are
  fetched (:func:`hub_allow_patterns`), not the whole repository;
* after the download, every file asked for is checked to be there;
* huggingface_hub's errors become one :class:`HubError` line saying what to do: a repository
  that is not there, a gated one (log in), no network, a full or read-only disk.

The files are written by huggingface_hub (each to a temporary file renamed into place), not
through hammr.output_file: it is the one writer that knows the hub's metadata, into the folder
the user named for it. ``huggingface_hub`` and ``pyarrow`` come with ``pip install
"hammr[data]"``.
"""

from __future__ import annotations

import errno
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hammr.datasets.catalogue import HubCopy
from hammr.eval.datasets._common import DatasetError
from hammr.eval.datasets.hub_parquet import INSTALL, layout_patterns, select_parquet

__all__ = [
    "HubError",
    "fetch_hub",
    "hub_allow_patterns",
    "hub_parquet_files",
]

INFO_TIMEOUT = 30.0
"""Seconds to wait for the hub's answer about the repository."""
LOGIN = (
    "log in with `hf auth login` (`huggingface-cli login` before huggingface_hub 1.0) or set "
    "HF_TOKEN"
)
_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_DENIED = {errno.EROFS, errno.EACCES, errno.EPERM}


class HubError(Exception):
    """A hub copy could not be fetched or found; the message is one line saying why and what
    to do."""


def _brief(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return " ".join(first.split())[:200] or type(e).__name__


def _huggingface_hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise HubError(
            f"fetching from the Hugging Face hub needs huggingface_hub: {INSTALL}"
        ) from None
    return huggingface_hub


def hub_allow_patterns(hub: HubCopy) -> list[str] | None:
    """The repository files a fetch of ``hub`` takes by default: its ``files`` when the
    catalogue lists them, else those of its config and split (and of its image config) in the
    hub's parquet layout; None (the whole repository) when it names neither."""
    if hub.files:
        return list(hub.files)
    patterns = layout_patterns(hub.config, hub.split)
    if patterns is None:
        return None
    if hub.image_config and hub.image_config != hub.config:
        patterns += layout_patterns(hub.image_config, hub.split) or []
    return patterns


def _network_errors() -> tuple[type[BaseException], ...]:
    """The transport errors of the HTTP client huggingface_hub uses (httpx2 in 2.x, httpx in
    1.x, requests before), whichever are installed."""
    found: list[type[BaseException]] = []
    for module, names in (
        ("httpx2", ("TransportError",)),
        ("httpx", ("TransportError",)),
        ("requests", ("ConnectionError", "Timeout")),
    ):
        try:
            loaded = importlib.import_module(module)
        except ImportError:
            continue
        found += [
            cls
            for name in names
            if isinstance(cls := getattr(loaded, name, None), type)
            and issubclass(cls, BaseException)
        ]
    return tuple(found)


def _explain(e: BaseException, hub: HubCopy, where: str, dest: Path) -> str | None:
    """One line for an error of huggingface_hub or of the disk; None for one this module does
    not know (a bug: raised as it is)."""
    utils: Any = importlib.import_module("huggingface_hub.utils")  # its errors, in any version
    repo = hub.repo
    status = getattr(getattr(e, "response", None), "status_code", None)
    if isinstance(e, utils.GatedRepoError):
        return (
            f"the dataset {repo} on {where} is gated: accept its conditions on "
            f"{where}/datasets/{repo} while logged in there, then {LOGIN}"
        )
    if isinstance(e, utils.RepositoryNotFoundError):
        return (
            f"{where} has no dataset repository {repo} (HTTP {status}): check the name; "
            f"a private one needs a login: {LOGIN}"
        )
    if isinstance(e, utils.RevisionNotFoundError):
        return f"the dataset {repo} on {where} has no revision {hub.revision!r}"
    if isinstance(e, utils.HfHubHTTPError):
        if status in (401, 403):
            return f"{where} refused access to the dataset {repo} (HTTP {status}): {LOGIN}"
        return (
            f"{where} answered HTTP {status} while fetching the dataset {repo} ({_brief(e)}); "
            "try again later (what is complete is kept)"
        )
    if isinstance(e, utils.OfflineModeIsEnabled):
        return f"huggingface_hub is in offline mode (HF_HUB_OFFLINE); unset it to fetch {repo}"
    if isinstance(e, _network_errors()):
        return (
            f"cannot reach {where} ({type(e).__name__}: {_brief(e)}); check the network "
            "connection (and HF_ENDPOINT or the proxy settings); run again to resume"
        )
    if isinstance(e, utils.LocalEntryNotFoundError):
        return (
            f"the connection to {where} failed while fetching the dataset {repo}; run again to "
            "fetch the files still missing"
        )
    if isinstance(e, utils.HFValidationError):
        return f"{repo!r} is not a hub repository id ({_brief(e)})"
    if isinstance(e, OSError):
        if e.errno in _FULL:
            return (
                f"no space left on the disk of {dest} while fetching the dataset {repo}; free "
                "some and run again (the files already complete are kept)"
            )
        if e.errno in _DENIED:
            return f"cannot write under {dest} ({e.strerror or e}); choose a writable folder"
        return f"cannot write under {dest} while fetching the dataset {repo}: {e.strerror or e}"
    return None


def _quiet_bars() -> type[Any]:
    """A progress bar class that shows nothing (``progress=False``)."""
    from tqdm.auto import tqdm

    class Quiet(tqdm):  # type: ignore[misc,unused-ignore]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            kwargs.pop("name", None)
            super().__init__(*args, **kwargs)

    return Quiet


def fetch_hub(
    hub: HubCopy,
    dest: Path,
    *,
    endpoint: str | None = None,
    allow_patterns: Sequence[str] | None = None,
    progress: bool = True,
) -> Path:
    """Fetch the dataset repository ``hub.repo`` at ``hub.revision`` (default: its default
    branch) into ``dest``; return ``dest``.

    ``allow_patterns``: the repository paths to take (fnmatch patterns; default
    :func:`hub_allow_patterns`; ``["*"]`` for everything). ``endpoint``: the hub's address
    (default ``HF_ENDPOINT``, else huggingface.co), for mirrors and tests. ``progress``:
    huggingface_hub's progress bars on stderr. Files already complete at the same commit are
    not transferred again. Raises :class:`HubError` (one line) when the repository, the
    network or the disk fails it."""
    hf = _huggingface_hub()
    filter_repo_objects = importlib.import_module("huggingface_hub.utils").filter_repo_objects
    # the constants module is not among huggingface_hub's lazily exported names
    default = importlib.import_module("huggingface_hub.constants").ENDPOINT
    where = (endpoint or default).rstrip("/")
    patterns = list(allow_patterns) if allow_patterns is not None else hub_allow_patterns(hub)
    dest = Path(dest)
    try:
        dest.mkdir(parents=True, exist_ok=True)
        api = hf.HfApi(endpoint=where)
        info = api.repo_info(
            hub.repo, repo_type="dataset", revision=hub.revision or None, timeout=INFO_TIMEOUT
        )
        commit = info.sha
        listed = [s.rfilename for s in info.siblings] if info.siblings is not None else None
        wanted = list(filter_repo_objects(listed, allow_patterns=patterns)) if listed else []
        if listed is not None and not wanted:
            asked = ", ".join(patterns or ["*"])
            raise HubError(
                f"no file of the dataset {hub.repo} on {where} matches {asked}; it has "
                f"{len(listed)} file(s)"
            )
        hf.snapshot_download(
            repo_id=hub.repo,
            repo_type="dataset",
            revision=commit or hub.revision or None,
            local_dir=dest,
            allow_patterns=patterns,
            endpoint=where,
            tqdm_class=None if progress else _quiet_bars(),
        )
    except HubError:
        raise
    except Exception as e:
        line = _explain(e, hub, where, dest)
        if line is None:
            raise
        raise HubError(line) from e
    missing = [name for name in wanted if not (dest / name).is_file()]
    if missing:
        shown = ", ".join(missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        )
        raise HubError(
            f"{len(missing)} file(s) of the dataset {hub.repo} are still missing under {dest} "
            f"({shown}); run again to fetch them"
        )
    return dest


def hub_parquet_files(hub: HubCopy, dest: Path) -> list[Path]:
    """The parquet files of the snapshot ``dest`` that hold ``hub``'s config and split (the
    files the ``hub_parquet`` adapter reads for them); HubError naming what the folder holds
    when there are none."""
    if not Path(dest).is_dir():
        raise HubError(f"{dest} is not a folder; fetch the dataset {hub.repo} into it first")
    try:
        return select_parquet(Path(dest), hub.config, hub.split)
    except DatasetError as e:
        raise HubError(str(e)) from None
